/* Host-only stand-in for QEMU's qemu/processor.h */
#ifndef CXLPOD_SHIM_PROCESSOR_H
#define CXLPOD_SHIM_PROCESSOR_H
#define cpu_relax() __asm__ volatile("pause" ::: "memory")
#endif
