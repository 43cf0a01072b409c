/* Host-only stand-in for QEMU's qemu/atomic.h (the subset the engine uses) */
#ifndef CXLPOD_SHIM_ATOMIC_H
#define CXLPOD_SHIM_ATOMIC_H
#define qatomic_read(p) __atomic_load_n(p, __ATOMIC_RELAXED)
#define qatomic_set(p, v) __atomic_store_n(p, v, __ATOMIC_RELAXED)
#define qatomic_store_release(p, v) __atomic_store_n(p, v, __ATOMIC_RELEASE)
#define qatomic_load_acquire(p) __atomic_load_n(p, __ATOMIC_ACQUIRE)
#define qatomic_xchg(p, v) __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST)
#define qatomic_fetch_inc(p) __atomic_fetch_add(p, 1, __ATOMIC_SEQ_CST)
#define qatomic_fetch_add(p, v) __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST)
#define qatomic_fetch_and(p, v) __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST)
#define qatomic_fetch_or(p, v) __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST)
#define qatomic_cmpxchg(p, o, n) ({ \
    __typeof__(*(p)) _old = (o); \
    __atomic_compare_exchange_n(p, &_old, n, false, __ATOMIC_SEQ_CST, \
                                __ATOMIC_SEQ_CST); \
    _old; })
/* as in QEMU: a compiler barrier as well as the fence */
#define barrier() __asm__ __volatile__("" ::: "memory")
#define smp_rmb() ({ barrier(); __atomic_thread_fence(__ATOMIC_ACQUIRE); })
#define smp_wmb() ({ barrier(); __atomic_thread_fence(__ATOMIC_RELEASE); })
#define smp_mb() ({ barrier(); __atomic_thread_fence(__ATOMIC_SEQ_CST); })
#endif
