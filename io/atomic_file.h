// Writing a whole file so that readers see either the old file or the whole
// new one, never a part: the bytes go to a temporary file beside `path`
// (same directory, so the rename stays on one filesystem), are fsync'ed, and
// the temporary is renamed over `path`. On any failure (a full disk, no
// permission) the temporary is removed, `path` is left as it was, and the
// Status names the path and the system's reason.
#ifndef TPUMESH_IO_ATOMIC_FILE_H_
#define TPUMESH_IO_ATOMIC_FILE_H_

#include <signal.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace tpumesh {

Status WriteFileAtomic(const std::string& path, std::string_view bytes);
// Several files, all or none: every file's bytes go to its temporary and are
// fsync'ed first; only when all of them are on disk are they renamed into
// place, each existing target (a file or a symlink) first linked to a
// backup temporary. If any rename fails, the renames already done are
// rolled back (the old files restored, files that did not exist removed),
// so no path is left changed; every temporary is removed either way, and
// the directories are fsync'ed.
Status WriteFilesAtomic(const std::vector<std::pair<std::string, std::string>>& files);
// Every temporary this layer makes is named kTemporaryPrefix<pid>-<n> in
// the target's directory: short whatever the target's name (a name of 255
// bytes, the most a directory entry holds, can still be written), and
// found by its prefix.
inline constexpr char kTemporaryPrefix[] = ".tpumesh-";
std::string TemporaryPathBeside(const std::string& path);
// Makes the directory entries of `paths` durable (a rename, an unlink): each
// folder they are in is fsync'ed once. Best effort (a folder that cannot be
// opened is skipped).
void SyncDirectories(const std::vector<std::string>& paths);
// Whether `path` can be written as WriteFileAtomic writes it, checked before
// a long run: its directory exists and takes a new file (a probe is created
// and removed), and `path` is not a directory, FIFO, device or socket.
// `flag` names the option in the message ("--save-latents out.h5: ...").
Status CheckWritable(const std::string& path, const std::string& flag = "");

// Temporary files that must not outlive a kill by SIGINT or SIGTERM. Every
// temporary this layer creates (WriteFileAtomic's, WriteFilesAtomic's, the
// model file writer's) is registered while it exists; once
// InstallTempFileCleanup has run (the CLI's main does it first), those
// signals unlink every registered file and then end the process with the
// signal's own status. Up to 64 files at once; async-signal-safe. A folder
// may be registered too (one a run made for its outputs): after the files,
// each registered folder that is empty then is removed.
//
// Renaming outputs into place is one commit that a signal never splits: a
// CommitSection blocks SIGINT and SIGTERM on its thread, and the handler,
// run on any other thread, waits (up to 5 s) for an open section to close
// before it unlinks anything. So a signal during WriteFilesAtomic's renames
// leaves the whole new set or the whole old one, never a mix, and a file
// registered here (a run's preview) cannot be renamed back into place after
// the handler removed it. Sections nest on one thread (the outer one
// counts).
class CommitSection {
 public:
  CommitSection();
  ~CommitSection();
  CommitSection(const CommitSection&) = delete;
  CommitSection& operator=(const CommitSection&) = delete;

 private:
  sigset_t old_mask_;
  bool nested_ = false;  // inside a section this thread already holds
};
void RegisterTempFile(const std::string& path);
void UnregisterTempFile(const std::string& path);
void InstallTempFileCleanup();
// The handler itself, for a command that installs its own SIGINT handler
// (generate's graceful stop) and hands the second signal back to it.
extern "C" void RemoveTempFilesAndDie(int sig);
// The line the handler writes to stderr before it ends the process on
// SIGTERM (the newline added; up to 255 bytes). Empty (the default): none.
// For rank 0 of several, whose launcher ends it with SIGTERM when the user
// presses Ctrl-C or another rank dies (tools/ranks).
void SetSigtermLine(const std::string& line);
// "<what>: <strerror(e)>" with the code that says what kind of failure it
// was: NotFound (ENOENT, ENOTDIR), ResourceExhausted (ENOSPC, EDQUOT),
// DataLoss (EIO), ResourceExhausted also for EFBIG (a file size limit),
// InvalidArgument otherwise.
Status ErrnoStatus(const std::string& what, int e);

}  // namespace tpumesh

#endif  // TPUMESH_IO_ATOMIC_FILE_H_
