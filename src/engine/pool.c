// The engine's persistent thread pool. Workers wait for a dispatch by
// spinning a little and then sleeping on a futex, so a short gap between ops
// costs no system call while an idle runner uses no CPU. The same
// spin-then-futex scheme gives the barrier that task functions use between
// phases (quantize activations, then multiply).
//
// Lock order: none; everything is C11 atomics on the fields of struct
// engine_pool.
#include "engine/engine.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

// Spin this many rounds before sleeping (some tens of microseconds: longer
// than the gap between two ops of a decode step, short enough not to steal
// much CPU from other processes on a busy machine).
#define POOL_SPIN_ROUNDS 4000

struct engine_pool {
    int n_threads;
    pthread_t *threads;
    struct worker *workers;

    engine_task_fn fn;  // set by the caller before gen is bumped
    void *arg;

    _Atomic uint32_t gen;  // dispatch generation (futex word)
    _Atomic int n_done;    // workers finished with the current dispatch
    _Atomic int n_sleepers;
    _Atomic int stop;

    _Atomic int bar_count;
    _Atomic uint32_t bar_phase;  // futex word
    _Atomic int bar_sleepers;
};

struct worker {
    struct engine_pool *pool;
    int ith;
};

static void futex_wait(_Atomic uint32_t *addr, uint32_t expected)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

// Waits until *word != seen: spin first, then sleep.
static void wait_change(_Atomic uint32_t *word, uint32_t seen, _Atomic int *sleepers)
{
    for (int i = 0; i < POOL_SPIN_ROUNDS; i++) {
        if (atomic_load_explicit(word, memory_order_acquire) != seen)
            return;
        cpu_relax();
    }
    while (atomic_load(word) == seen) {
        atomic_fetch_add(sleepers, 1);
        if (atomic_load(word) == seen)
            futex_wait(word, seen);
        atomic_fetch_sub(sleepers, 1);
    }
}

static void *worker_main(void *p)
{
    struct worker *w = p;
    struct engine_pool *pool = w->pool;
    uint32_t seen = 0;
    for (;;) {
        wait_change(&pool->gen, seen, &pool->n_sleepers);
        seen = atomic_load(&pool->gen);
        if (atomic_load(&pool->stop))
            break;
        pool->fn(pool->arg, w->ith, pool->n_threads);
        atomic_fetch_add_explicit(&pool->n_done, 1, memory_order_release);
    }
    return NULL;
}

int engine_physical_cores(void)
{
    // Distinct (package, core) pairs among the CPUs we may run on.
    cpu_set_t set;
    CPU_ZERO(&set);
    int n_allowed = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        n_allowed = CPU_COUNT(&set);
    long n_online = sysconf(_SC_NPROCESSORS_ONLN);
    if (n_allowed <= 0)
        n_allowed = n_online > 0 ? (int)n_online : 1;

    int n_cores = 0;
    long seen_ids[1024];
    for (int cpu = 0; cpu < CPU_SETSIZE && n_cores < 1024; cpu++) {
        if (!CPU_ISSET(cpu, &set))
            continue;
        char path[128];
        long core = -1, pkg = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%ld", &core) != 1)
                core = -1;
            fclose(f);
        }
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id",
                 cpu);
        f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%ld", &pkg) != 1)
                pkg = 0;
            fclose(f);
        }
        if (core < 0)
            return n_allowed;  // no topology: count logical CPUs
        long id = pkg * 100000 + core;
        bool dup = false;
        for (int i = 0; i < n_cores; i++)
            dup = dup || seen_ids[i] == id;
        if (!dup)
            seen_ids[n_cores++] = id;
    }
    if (n_cores <= 0)
        n_cores = n_allowed;
    return n_cores < n_allowed ? n_cores : n_allowed;
}

struct engine_pool *engine_pool_new(int n_threads, struct err *e)
{
    if (n_threads <= 0)
        n_threads = engine_physical_cores();
    if (n_threads > ENGINE_MAX_THREADS)
        n_threads = ENGINE_MAX_THREADS;
    struct engine_pool *p = xcalloc(1, sizeof *p);
    p->n_threads = n_threads;
    p->threads = xcalloc((size_t)n_threads, sizeof *p->threads);
    p->workers = xcalloc((size_t)n_threads, sizeof *p->workers);
    for (int i = 1; i < n_threads; i++) {
        p->workers[i] = (struct worker){p, i};
        int rc = pthread_create(&p->threads[i], NULL, worker_main, &p->workers[i]);
        if (rc != 0) {
            p->n_threads = i;  // stop the ones already started
            engine_pool_free(p);
            err_set(e, ERR_INTERNAL, "start compute thread: %s", strerror(rc));
            return NULL;
        }
    }
    return p;
}

void engine_pool_free(struct engine_pool *p)
{
    if (!p)
        return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->gen, 1);
    futex_wake_all(&p->gen);
    for (int i = 1; i < p->n_threads; i++)
        pthread_join(p->threads[i], NULL);
    free(p->threads);
    free(p->workers);
    free(p);
}

int engine_pool_n_threads(const struct engine_pool *p)
{
    return p->n_threads;
}

void engine_pool_run(struct engine_pool *p, engine_task_fn fn, void *arg)
{
    if (p->n_threads == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->n_done, 0);
    atomic_fetch_add(&p->gen, 1);  // seq_cst: pairs with the sleepers count
    if (atomic_load(&p->n_sleepers) > 0)
        futex_wake_all(&p->gen);
    fn(arg, 0, p->n_threads);
    int want = p->n_threads - 1;
    for (int i = 0; atomic_load_explicit(&p->n_done, memory_order_acquire) != want; i++) {
        if (i < POOL_SPIN_ROUNDS)
            cpu_relax();
        else
            sched_yield();
    }
}

void engine_pool_barrier(struct engine_pool *p)
{
    int nth = p->n_threads;
    if (nth == 1)
        return;
    uint32_t phase = atomic_load(&p->bar_phase);
    if (atomic_fetch_add(&p->bar_count, 1) == nth - 1) {
        atomic_store(&p->bar_count, 0);
        atomic_fetch_add(&p->bar_phase, 1);
        if (atomic_load(&p->bar_sleepers) > 0)
            futex_wake_all(&p->bar_phase);
        return;
    }
    wait_change(&p->bar_phase, phase, &p->bar_sleepers);
}
