# Device configuration for cxlpod's minimal qemu-system-x86_64.
# Lines "# qtest: <ninja target>" name extra targets scripts/build-qemu.sh builds.
CONFIG_Q35=y
CONFIG_PXB=y
CONFIG_PCIE_PORT=y
CONFIG_CXL=y
CONFIG_CXL_MEM_DEVICE=y
CONFIG_VIRTIO_PCI=y
CONFIG_VIRTIO_SERIAL=y
CONFIG_VIRTIO_BLK=y
# host-userland guests: the pod network and the host's root file system
CONFIG_VIRTIO_NET=y
CONFIG_VIRTIO_9P=y
# scripts/bench.sh: the pool file as a plain shared-memory BAR, the baseline
# most multi-VM shared-memory work uses
CONFIG_IVSHMEM_DEVICE=y
# cxlpod's multi-host shared-memory pod device (hw-cxl/)
CONFIG_CXL_SHM=y
# qtest: tests/qtest/cxl-shm-test
