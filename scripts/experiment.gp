# gnuplot script of scripts/experiment.sh: draws experiment.png from the
# data files it writes (dir = their folder, out = the PNG).
#   left:  guest time per allreduce against the number of hosts, coherent
#          window (solid) and non-coherent area + software coherence
#          (dashed), 64 KiB and 256 KiB vectors, snoop filter 32768 entries
#   right: guest time per allreduce in the coherent window against the
#          snoop filter's size (N = 2, 4; 256 KiB and 1 MiB vectors), with
#          the same allreduce in the non-coherent area (dashed, flat: it
#          never uses the filter)
set terminal pngcairo size 1500,640 font "DejaVu Sans,11"
set output out
set multiplot layout 1,2 title "cxlpod: allreduce in mode=timed under -icount (guest time; identical on every run)"

set logscale xy 2
set xlabel "hosts taking part (N)"
set ylabel "guest time per allreduce (us)"
set key top left
set grid
set xrange [1.7:19]
set xtics (2, 4, 8, 16)
set format y "%g"
set title "coherent window (solid) vs non-coherent area + writeback/invalidate (dashed)\nsnoop filter 32768 entries"
plot sprintf("%s/hosts-coherent-65536.dat", dir) using 1:2 with linespoints lw 2 pt 7 lc 1 title "64 KiB, coherent", \
     sprintf("%s/hosts-noncoherent-65536.dat", dir) using 1:2 with linespoints lw 2 dt 2 pt 6 lc 1 title "64 KiB, non-coherent", \
     sprintf("%s/hosts-coherent-262144.dat", dir) using 1:2 with linespoints lw 2 pt 7 lc 2 title "256 KiB, coherent", \
     sprintf("%s/hosts-noncoherent-262144.dat", dir) using 1:2 with linespoints lw 2 dt 2 pt 6 lc 2 title "256 KiB, non-coherent"

unset logscale
set logscale y 2
set xlabel "snoop filter entries (pod-wide, 8192 sets x ways)"
set xrange [0:122880]
set xtics 16384
set title "coherent window against the snoop filter's size\n(dashed: the same allreduce in the non-coherent area)"
set key at graph 0.98, graph 0.55 right
cfg = "2-262144 4-262144 2-1048576 4-1048576"
lab = "N=2,256K N=4,256K N=2,1M N=4,1M"
plot for [i=1:4] sprintf("%s/filter-%s.dat", dir, word(cfg, i)) \
        using 1:2 with linespoints lw 2 pt 7 lc i title word(lab, i), \
     for [i=1:4] sprintf("%s/nc-%s.dat", dir, word(cfg, i)) \
        using 1:2 with lines lw 1 dt 2 lc i notitle
unset multiplot
