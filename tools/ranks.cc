#include "tools/ranks.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "base/input_file.h"
#include "base/printable.h"
#include "io/atomic_file.h"
#include "kernels/matmul.h"

namespace tpumesh::tools {
namespace {

mesh::Cluster* g_cluster = nullptr;
std::vector<std::string> g_command_line;

constexpr int64_t kWholeUpTo = int64_t{64} << 20;
constexpr int64_t kEnds = int64_t{4} << 20;

void Fnv(uint64_t& h, const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(p[i]);
    h *= 1099511628211ull;
  }
}

// Argument i of a command line as a user would read it: with its flag when
// it is a flag's value ("--seed 2"), "nothing" past the end.
std::string DescribeArgument(const std::vector<std::string>& args, size_t i) {
  if (i >= args.size()) return "nothing more";
  std::string what = Printable(args[i]);
  if (i > 0 && args[i - 1].size() > 1 && args[i - 1][0] == '-' && (args[i].empty() || args[i][0] != '-'))
    what = Printable(args[i - 1]) + " " + what;
  return "'" + what + "'";
}

std::vector<std::string> SplitNul(const mesh::Bytes& b) {
  std::vector<std::string> out;
  std::string cur;
  for (std::byte c : b) {
    if (c == std::byte{0}) {
      out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(static_cast<char>(c));
    }
  }
  return out;
}

// Every rank was started with the same arguments (mpirun and srun start
// the same command on every rank; a rank given another --seed, prompt or
// --mesh would compute something else under rank 0's labels).
Status AgreeOnCommandLine(mesh::Cluster& cluster) {
  std::string mine;
  for (const std::string& a : g_command_line) mine.append(a).push_back('\0');
  TPUMESH_ASSIGN_OR_RETURN(std::vector<mesh::Bytes> all,
                           cluster.AllGatherBytes(std::as_bytes(std::span<const char>(mine.data(), mine.size()))));
  Status same;
  if (cluster.rank() == 0) {
    for (int r = 1; r < cluster.size() && same.ok(); ++r) {
      const std::vector<std::string> theirs = SplitNul(all[r]);
      if (theirs == g_command_line) continue;
      size_t i = 0;
      while (i < theirs.size() && i < g_command_line.size() && theirs[i] == g_command_line[i]) ++i;
      same = InvalidArgumentError("rank " + std::to_string(r) + " was started with " +
                                  DescribeArgument(theirs, i) + " where rank 0 has " +
                                  DescribeArgument(g_command_line, i) +
                                  ": every rank must run the same command, with the same flags and values");
    }
  }
  return cluster.Agree(same);
}

}  // namespace

void RememberCommandLine(int argc, char** argv) { g_command_line.assign(argv + 1, argv + argc); }

StatusOr<mesh::Cluster*> JoinCluster() {
  if (g_cluster == nullptr) {
    // The matmul's provider choice runs AMX's self-check in a forked child
    // where AMX is active (kernels/matmul.h): settle it before MPI starts,
    // as some MPI transports warn of (or break on) fork() after MPI_Init.
    if (mesh::LaunchedRanks() > 1) {
      TPUMESH_RETURN_IF_ERROR(
          kernels::ResolveProvider(kernels::Provider::kAuto, kernels::Precision::kDefault).status());
    }
    TPUMESH_ASSIGN_OR_RETURN(g_cluster, mesh::ConnectCluster());
    g_cluster->set_fail_fast(true);  // any error ends a command: end every rank at once
    if (g_cluster->size() > 1) TPUMESH_RETURN_IF_ERROR(AgreeOnCommandLine(*g_cluster));
    // Ctrl-C at mpirun's terminal reaches mpirun alone, which ends every
    // rank with SIGTERM: rank 0 says so, once.
    if (g_cluster->size() > 1 && g_cluster->rank() == 0)
      SetSigtermLine("tpumesh: rank 0 of " + std::to_string(g_cluster->size()) +
                     ": ended by SIGTERM (the launcher ends every rank on Ctrl-C, or when a rank dies); nothing "
                     "written");
  }
  return g_cluster;
}

mesh::Cluster* JoinedCluster() { return g_cluster; }

bool IsRootRank() { return g_cluster == nullptr || g_cluster->rank() == 0; }

StatusOr<std::string> InputDigest(const std::string& path) {
  TPUMESH_ASSIGN_OR_RETURN(const InputFile in, InputFile::Open(path));
  const int64_t size = in.size();
  uint64_t h = 14695981039346656037ull;
  std::vector<char> buf(1 << 20);
  auto hash = [&](int64_t from, int64_t n) -> Status {
    while (n > 0) {
      const int64_t k = std::min<int64_t>(n, static_cast<int64_t>(buf.size()));
      TPUMESH_RETURN_IF_ERROR(in.ReadAt(buf.data(), k, from));
      Fnv(h, buf.data(), static_cast<size_t>(k));
      from += k;
      n -= k;
    }
    return OkStatus();
  };
  if (size <= kWholeUpTo) {
    TPUMESH_RETURN_IF_ERROR(hash(0, size));
  } else {
    TPUMESH_RETURN_IF_ERROR(hash(0, kEnds));
    TPUMESH_RETURN_IF_ERROR(hash(size - kEnds, kEnds));
  }
  char out[64];
  std::snprintf(out, sizeof out, "%lld bytes, %016llx", static_cast<long long>(size), static_cast<unsigned long long>(h));
  return std::string(out);
}

Status AgreeToStart(mesh::Cluster& cluster, const Status& ready,
                    const std::vector<std::pair<std::string, std::string>>& inputs) {
  TPUMESH_RETURN_IF_ERROR(cluster.Agree(ready));
  if (cluster.size() == 1) return OkStatus();
  // Every input's digest, in the order given (the same flags on every rank:
  // the same program and arguments).
  std::string mine;
  Status read;
  for (const auto& [flag, path] : inputs) {
    if (path.empty()) continue;
    auto d = InputDigest(path);
    if (!d.ok()) {
      read = d.status().WithContext(flag);
      break;
    }
    mine += *d + "\n";
  }
  TPUMESH_RETURN_IF_ERROR(cluster.Agree(read));
  TPUMESH_ASSIGN_OR_RETURN(std::vector<mesh::Bytes> all,
                           cluster.AllGatherBytes(std::as_bytes(std::span<const char>(mine.data(), mine.size()))));
  Status same;
  if (cluster.rank() == 0) {
    for (int r = 1; r < cluster.size() && same.ok(); ++r) {
      const std::string theirs(reinterpret_cast<const char*>(all[r].data()), all[r].size());
      if (theirs == mine) continue;
      // Which input: the first line that differs.
      size_t line = 0, a = 0, b = 0;
      while (a < mine.size() && b < theirs.size()) {
        const size_t ea = mine.find('\n', a), eb = theirs.find('\n', b);
        if (mine.compare(a, ea - a, theirs, b, eb - b) != 0) break;
        a = ea + 1;
        b = eb + 1;
        ++line;
      }
      size_t k = 0;
      for (const auto& [flag, path] : inputs) {
        if (path.empty()) continue;
        if (k++ != line) continue;
        same = InvalidArgumentError(flag + " " + Printable(path) + ": rank " + std::to_string(r) +
                                    "'s copy differs from rank 0's (every rank reads its inputs: give every host "
                                    "the same file)");
        break;
      }
    }
  }
  return cluster.Agree(same);
}

Status RunOnRanks(const RankSteps& steps) {
  TPUMESH_ASSIGN_OR_RETURN(mesh::Cluster * cluster, JoinCluster());
  const bool root = cluster->rank() == 0;
  RankSteps::Inputs inputs;
  const Status ready = steps.check(*cluster, &inputs);
  TPUMESH_RETURN_IF_ERROR(AgreeToStart(*cluster, ready, inputs));
  Status finished;
  if (steps.root_alone) {
    if (root) finished = steps.work(*cluster);
  } else {
    TPUMESH_RETURN_IF_ERROR(steps.work(*cluster));
    if (steps.finish) finished = steps.finish(*cluster);
  }
  TPUMESH_RETURN_IF_ERROR(AgreeToFinish(*cluster, finished));
  if (root && steps.report) steps.report();
  return OkStatus();
}

Status AgreeToFinish(mesh::Cluster& cluster, const Status& done) {
  if (cluster.size() == 1) return done;
  // Rank 0 may have been writing (or computing alone) for longer than the
  // cluster's timeout: the others wait for it as long as it takes; a rank
  // that dies ends the job through the launcher.
  const double timeout = cluster.timeout();
  if (cluster.rank() != 0) cluster.set_timeout(std::numeric_limits<double>::max() / 4);
  Status agreed = cluster.Agree(done);
  cluster.set_timeout(timeout);
  return agreed;
}

}  // namespace tpumesh::tools
