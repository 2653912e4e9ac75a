// The plugin's shared object (pjrt/CMakeLists.txt): GetPjrtApi, defined in
// pjrt/api.cc in the static library tpumesh_pjrt, is its one exported
// symbol (pjrt_plugin.map); the link asks for it (--undefined), which pulls
// the table and everything it uses out of the static libraries. A MODULE
// library needs a source of its own: this one.
#include "pjrt/pjrt_c_api.h"
