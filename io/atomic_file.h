// Writing a whole file so that readers see either the old file or the whole
// new one, never a part: the bytes go to a temporary file beside `path`
// (same directory, so the rename stays on one filesystem), are fsync'ed, and
// the temporary is renamed over `path`. On any failure (a full disk, no
// permission) the temporary is removed, `path` is left as it was, and the
// Status names the path and the system's reason.
#ifndef TPUMESH_IO_ATOMIC_FILE_H_
#define TPUMESH_IO_ATOMIC_FILE_H_

#include <string>
#include <string_view>

#include "base/status.h"

namespace tpumesh {

Status WriteFileAtomic(const std::string& path, std::string_view bytes);
// "<what>: <strerror(e)>" with the code that says what kind of failure it
// was: NotFound (ENOENT, ENOTDIR), ResourceExhausted (ENOSPC, EDQUOT),
// DataLoss (EIO), InvalidArgument otherwise.
Status ErrnoStatus(const std::string& what, int e);

}  // namespace tpumesh

#endif  // TPUMESH_IO_ATOMIC_FILE_H_
