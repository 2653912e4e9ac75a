#include "io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace tpumesh {
namespace {

// 0 or errno.
int WriteAll(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    done += static_cast<size_t>(n);
  }
  return 0;
}

// The registry of temporaries (fixed storage: the handler may not allocate).
constexpr int kSlots = 64;
constexpr size_t kPathMax = 4096;
struct Slot {
  std::atomic<int> state{0};  // 0 free, 1 being written, 2 live
  char path[kPathMax];
};
Slot g_slots[kSlots];

// The thread inside a CommitSection (its kernel thread id), or 0.
std::atomic<pid_t> g_committing{0};

pid_t ThreadId() { return static_cast<pid_t>(::syscall(SYS_gettid)); }
char g_sigterm_line[256];  // set before any handler runs

void WriteAll(const char* text) {
  size_t n = std::strlen(text);
  while (n > 0) {
    const ssize_t k = ::write(STDERR_FILENO, text, n);
    if (k <= 0) return;
    text += k;
    n -= static_cast<size_t>(k);
  }
}

}  // namespace

void SetSigtermLine(const std::string& line) {
  const size_t n = std::min(line.size(), sizeof g_sigterm_line - 2);
  std::memcpy(g_sigterm_line, line.data(), n);
  g_sigterm_line[n] = n > 0 ? '\n' : '\0';
  g_sigterm_line[n + 1] = '\0';
}

void RegisterTempFile(const std::string& path) {
  if (path.size() >= kPathMax) return;
  for (Slot& s : g_slots) {
    int expected = 0;
    if (s.state.compare_exchange_strong(expected, 1)) {
      std::memcpy(s.path, path.c_str(), path.size() + 1);
      s.state.store(2);
      return;
    }
  }
}

void UnregisterTempFile(const std::string& path) {
  for (Slot& s : g_slots)
    if (s.state.load() == 2 && path == s.path) {
      s.state.store(0);
      return;
    }
}

CommitSection::CommitSection() {
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &old_mask_);
  const pid_t me = ThreadId();
  nested_ = g_committing.load() == me;  // a commit inside this thread's own: one section
  if (nested_) return;
  for (pid_t expected = 0; !g_committing.compare_exchange_weak(expected, me); expected = 0) sched_yield();
}

CommitSection::~CommitSection() {
  if (!nested_) g_committing.store(0);
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);  // a pending signal runs the handler now
}

extern "C" void RemoveTempFilesAndDie(int sig) {
  // An open commit (on another thread: the committing one blocks these
  // signals) finishes first, and then none starts: the handler takes the
  // commit itself, so a thread still running cannot write a file (a
  // preview) after the cleanup below. nanosleep is async-signal-safe.
  const pid_t me = ThreadId();
  for (int i = 0; i < 5000; ++i) {
    pid_t expected = 0;
    if (g_committing.load() == me || g_committing.compare_exchange_strong(expected, me)) break;
    const struct timespec ms = {0, 1000000};
    ::nanosleep(&ms, nullptr);
  }
  for (Slot& s : g_slots)
    if (s.state.load() == 2) ::unlink(s.path);
  // Then the folders registered (a run's output folder it made), in the
  // order registered (innermost first), each only if now empty.
  for (Slot& s : g_slots)
    if (s.state.load() == 2) ::rmdir(s.path);
  if (sig == SIGTERM) WriteAll(g_sigterm_line);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void InstallTempFileCleanup() {
  struct sigaction sa {};
  sa.sa_handler = RemoveTempFilesAndDie;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// "<what>: <strerror>", with a code that says what kind of failure it was.
Status ErrnoStatus(const std::string& what, int e) {
  std::string m = what + ": " + std::generic_category().message(e);
  switch (e) {
    case ENOENT:
    case ENOTDIR:
      return NotFoundError(std::move(m));
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return ResourceExhaustedError(std::move(m));
    case EIO:
      return DataLossError(std::move(m));
    default:
      return InvalidArgumentError(std::move(m));
  }
}

std::string TemporaryPathBeside(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  const std::string name = std::string(kTemporaryPrefix) + std::to_string(getpid()) + "-" +
                           std::to_string(counter.fetch_add(1));
  return dir.empty() ? name : (dir / name).string();
}

void SyncDirectories(const std::vector<std::string>& paths) {
  std::vector<std::string> dirs;
  for (const std::string& p : paths) {
    std::string d = std::filesystem::path(p).parent_path().string();
    if (d.empty()) d = ".";
    if (std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
  }
  for (const std::string& d : dirs) {
    const int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) continue;
    ::fsync(fd);
    ::close(fd);
  }
}

namespace {

// Writes `bytes` to a new temporary beside `path` and fsyncs it; 0 or errno.
int WriteTemporary(const std::string& path, std::string_view bytes, std::string* temp) {
  int fd = -1, e = 0;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    *temp = TemporaryPathBeside(path);
    fd = ::open(temp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
      e = errno;
      if (e != EEXIST) break;
    }
  }
  if (fd < 0) {
    temp->clear();
    return e;
  }
  RegisterTempFile(*temp);
  e = WriteAll(fd, bytes);
  if (e == 0 && ::fsync(fd) != 0) e = errno;
  if (::close(fd) != 0 && e == 0 && errno != EINTR) e = errno;
  if (e != 0) {
    ::unlink(temp->c_str());
    UnregisterTempFile(*temp);
    temp->clear();
  }
  return e;
}

}  // namespace

Status WriteFileAtomic(const std::string& path, std::string_view bytes) {
  std::vector<std::pair<std::string, std::string>> one;
  one.emplace_back(path, std::string(bytes));
  return WriteFilesAtomic(one);
}

Status WriteFilesAtomic(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::string> temps;
  auto remove_temps = [&] {
    for (const std::string& t : temps) {
      ::unlink(t.c_str());
      UnregisterTempFile(t);
    }
  };
  for (const auto& [path, bytes] : files) {
    if (path.empty()) {
      remove_temps();
      return InvalidArgumentError("cannot write a file to an empty path");
    }
    std::string temp;
    if (const int e = WriteTemporary(path, bytes, &temp); e != 0) {
      remove_temps();
      return ErrnoStatus("cannot write " + path, e);
    }
    temps.push_back(temp);
  }
  // The commit: every target that exists keeps a way back (a hard link of
  // the old file under a temporary name), then each temporary is renamed
  // over its target. If a rename fails, the ones done are undone (the old
  // files back, the new ones removed), so the set is all new or all old.
  std::vector<std::string> backups(files.size());
  std::vector<bool> existed(files.size(), false);
  auto drop_backups = [&] {
    for (const std::string& b : backups)
      if (!b.empty()) {
        ::unlink(b.c_str());
        UnregisterTempFile(b);
      }
  };
  const CommitSection commit;  // no signal between the renames
  for (size_t i = 0; i < files.size(); ++i) {
    struct stat st;
    if (::lstat(files[i].first.c_str(), &st) != 0) continue;
    existed[i] = true;
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) continue;
    for (int attempt = 0; attempt < 16 && backups[i].empty(); ++attempt) {
      std::string b = TemporaryPathBeside(files[i].first);
      // linkat without AT_SYMLINK_FOLLOW: a symlink is kept as the link.
      if (::linkat(AT_FDCWD, files[i].first.c_str(), AT_FDCWD, b.c_str(), 0) == 0) {
        RegisterTempFile(b);
        backups[i] = b;
      } else if (errno != EEXIST) {
        break;  // no hard links here: this target cannot be rolled back
      }
    }
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (std::rename(temps[i].c_str(), files[i].first.c_str()) == 0) continue;
    const int e = errno;
    std::string kept;  // old files whose restore failed: their backup stays, named in the error
    for (size_t j = 0; j < i; ++j) {
      if (!backups[j].empty() && std::rename(backups[j].c_str(), files[j].first.c_str()) == 0) {
        UnregisterTempFile(backups[j]);
        backups[j].clear();
      } else if (!backups[j].empty()) {
        UnregisterTempFile(backups[j]);
        kept += "; the old " + files[j].first + " is kept as " + backups[j];
        backups[j].clear();
      } else if (!existed[j]) {
        ::unlink(files[j].first.c_str());
      }
    }
    for (size_t j = i; j < temps.size(); ++j) ::unlink(temps[j].c_str());
    for (const std::string& t : temps) UnregisterTempFile(t);
    drop_backups();
    std::vector<std::string> paths;
    for (const auto& f : files) paths.push_back(f.first);
    SyncDirectories(paths);
    const Status failed = ErrnoStatus("cannot write " + files[i].first, e);
    return kept.empty() ? failed : Status(failed.code(), failed.message() + kept);
  }
  for (const std::string& t : temps) UnregisterTempFile(t);
  drop_backups();
  std::vector<std::string> paths;
  for (const auto& f : files) paths.push_back(f.first);
  SyncDirectories(paths);
  return OkStatus();
}

Status CheckWritable(const std::string& path, const std::string& flag) {
  const std::string what = flag.empty() ? path : flag + " " + path;
  if (path.empty()) return InvalidArgumentError((flag.empty() ? std::string("output") : flag) + ": empty path");
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return InvalidArgumentError(what + ": is a directory");
    if (!S_ISREG(st.st_mode))
      return InvalidArgumentError(what + ": not a regular file (a FIFO, device or socket is never written)");
  }
  const std::filesystem::path p(path);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  const long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  if (name_max > 0 && static_cast<long>(p.filename().string().size()) > name_max)
    return ErrnoStatus(what + ": a name of " + std::to_string(p.filename().string().size()) + " bytes, more than the " +
                           std::to_string(name_max) + " this folder takes",
                       ENAMETOOLONG);
  std::string temp;
  const int e = WriteTemporary(path, "", &temp);
  if (e != 0) return ErrnoStatus(what + ": cannot write there", e);
  ::unlink(temp.c_str());
  UnregisterTempFile(temp);
  return OkStatus();
}

}  // namespace tpumesh
