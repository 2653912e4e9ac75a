// How the ops spread their work over host threads: a fixed list of tasks,
// cut the same way whatever the thread count, run by TBB with a static
// partitioner. Since no task's result depends on which thread runs it or on
// how many tasks run beside it, every op is bit-identical for every thread
// count (the determinism rule of docs/architecture.md).
//
// Contract for num_threads: 1 runs every task on the calling thread, in
// order, without touching TBB; n > 1 runs them in a private tbb::task_arena
// of n threads (at most the host's cores; one per calling thread and n, kept
// for the thread's life); 0 uses the caller's current arena
// (inside a mesh::Device that is the device's arena, sized to its
// threads_per_device). Negative is treated as 1. body(begin, end) receives a
// contiguous range of task indices and may keep scratch for the whole range;
// it must not throw. Every task runs with the calling thread's
// floating-point environment (rounding mode, denormal flushing). Under ThreadSanitizer (which cannot see libtbb's
// hand-offs) the same ranges run on std::threads instead.
#ifndef TPUMESH_KERNELS_OPS_PARALLEL_H_
#define TPUMESH_KERNELS_OPS_PARALLEL_H_

#include <cstdint>
#include <functional>

namespace tpumesh::kernels {

void ParallelForTasks(
    int64_t num_tasks, int num_threads,
    const std::function<void(int64_t begin, int64_t end)>& body);

// How many threads run the tasks of ParallelForTasks(n, num_threads, ...):
// 1 for num_threads 1 or negative, min(num_threads, cores) for num_threads
// > 1, the current arena's concurrency for 0. For ops that size their task grid to the
// team (only where the result does not depend on the grid).
int ParallelConcurrency(int num_threads);

// For an op with several parallel phases: runs phases(inner) once, where
// inner is the num_threads to pass to each ParallelForTasks inside. With
// num_threads > 1 the phases share one arena (inner = 0) instead of building
// one per phase; otherwise inner = num_threads.
void RunPhases(int num_threads,
               const std::function<void(int inner_threads)>& phases);

}  // namespace tpumesh::kernels

#endif  // TPUMESH_KERNELS_OPS_PARALLEL_H_
