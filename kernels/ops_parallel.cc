#include "kernels/ops_parallel.h"

#include <tbb/blocked_range.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#if defined(__SANITIZE_THREAD__)
#define TPUMESH_OPS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TPUMESH_OPS_TSAN 1
#endif
#endif

namespace tpumesh::kernels {
namespace {

// More threads than the host has would only oversubscribe it (and TBB
// warns); the result is the same either way.
int Cap(int num_threads) {
  return std::min(num_threads, tbb::info::default_concurrency());
}

// The calling thread's private arena of n threads (n capped), made on first
// use and kept for the thread's life: building a tbb::task_arena per call
// cost about 0.1 ms, as much as a CLIP linear of 154 x 768 x 768 computes on
// 2 threads (that product ran no faster on 2 threads than on 1).
[[maybe_unused]] tbb::task_arena& PrivateArena(int num_threads) {
  const int n = Cap(num_threads);
  thread_local std::vector<std::unique_ptr<tbb::task_arena>> arenas;
  if (static_cast<int>(arenas.size()) <= n) arenas.resize(static_cast<size_t>(n) + 1);
  if (!arenas[static_cast<size_t>(n)]) arenas[static_cast<size_t>(n)] = std::make_unique<tbb::task_arena>(n);
  return *arenas[static_cast<size_t>(n)];
}

#ifdef TPUMESH_OPS_TSAN
// Under ThreadSanitizer: libtbb is not instrumented, so the hand-off of a
// range to a TBB worker (and the join) is invisible to TSan and every
// parallel_for reports false races inside TBB's own headers. TSan builds run
// the same static partition on std::threads instead, whose create and join
// TSan does see, so the ops' own accesses are still checked for races.
void RunOnThreads(int64_t num_tasks, int threads,
                  const std::function<void(int64_t, int64_t)>& body) {
  threads = static_cast<int>(std::min<int64_t>(threads, num_tasks));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) {
    pool.emplace_back([&, t] {
      body(num_tasks * t / threads, num_tasks * (t + 1) / threads);
    });
  }
  body(0, num_tasks / threads);
  for (std::thread& th : pool) th.join();
}
#endif

}  // namespace

void ParallelForTasks(int64_t num_tasks, int num_threads,
                      const std::function<void(int64_t, int64_t)>& body) {
  if (num_tasks <= 0) return;
  if (num_threads == 1 || num_threads < 0 || num_tasks == 1) {
    body(0, num_tasks);
    return;
  }
#ifdef TPUMESH_OPS_TSAN
  RunOnThreads(num_tasks,
               num_threads == 0 ? tbb::this_task_arena::max_concurrency()
                                : Cap(num_threads),
               body);
#else
  // The caller's floating-point environment (MXCSR: rounding, flushing of
  // denormals), captured here on the calling thread, is the one every task
  // runs with, whichever thread takes it (hlo/ runs XLA's FTZ/DAZ).
  tbb::task_group_context ctx(tbb::task_group_context::bound,
                              tbb::task_group_context::default_traits | tbb::task_group_context::fp_settings);
  auto run = [&] {
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, num_tasks, 1),
        [&](const tbb::blocked_range<int64_t>& r) { body(r.begin(), r.end()); },
        tbb::static_partitioner(), ctx);
  };
  if (num_threads == 0) {
    run();
  } else {
    PrivateArena(num_threads).execute(run);
  }
#endif
}

int ParallelConcurrency(int num_threads) {
  if (num_threads == 0) return tbb::this_task_arena::max_concurrency();
  if (num_threads < 1) return 1;
  return Cap(num_threads);
}

void RunPhases(int num_threads, const std::function<void(int)>& phases) {
#ifdef TPUMESH_OPS_TSAN
  phases(num_threads);
#else
  if (num_threads > 1) {
    PrivateArena(num_threads).execute([&] { phases(0); });
  } else {
    phases(num_threads);
  }
#endif
}

}  // namespace tpumesh::kernels
