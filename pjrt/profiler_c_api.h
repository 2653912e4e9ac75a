// profiler_c_api.h: the PJRT profiler extension's ABI, as tpumesh offers it.
//
// Written from the documented layout of XLA's
// xla/pjrt/c/pjrt_c_api_profiler_extension.h (extension version 1) and
// xla/backends/profiler/plugin/profiler_c_api.h (PLUGIN_PROFILER_VERSION 1);
// it is not those files. The extension is a link of PJRT_Api's extension
// chain (type 1) holding a table of profiler functions, PLUGIN_Profiler_Api.
//
// How JAX uses it (jaxlib 0.4.38 and 0.10.2: jax._src.xla_bridge's
// register_plugin calls register_plugin_profiler on a plugin loaded from a
// library path): jaxlib finds the extension, checks the table's struct_size
// equals 80 exactly, and registers a profiler factory with its profiler
// framework (tsl). Each jax.profiler.trace session then calls create,
// start, stop, collect_data and destroy; collect_data gives a serialized
// tensorflow.profiler.XSpace whose planes jaxlib adds to the session's own
// and writes to <logdir>/plugins/profile/<run>/<host>.xplane.pb.
//
// Contract (as XLA's own plugin tracer behaves): jaxlib does not set
// struct_size in the argument structs (they are read as given, never
// checked); collect_data called with buffer == nullptr sets
// buffer_size_in_bytes and points `buffer` at the plugin's own bytes (valid
// until destroy; newer jaxlib reads them there), called with a buffer copies
// the bytes into it (the two-call protocol the header documents).
#ifndef TPUMESH_PJRT_PROFILER_C_API_H_
#define TPUMESH_PJRT_PROFILER_C_API_H_

#include <cstddef>
#include <cstdint>

#include "pjrt/pjrt_c_api.h"

extern "C" {

inline constexpr int kPjrtProfilerExtensionType =
    1;  // PJRT_Extension_Type_Profiler
inline constexpr int kPluginProfilerVersion = 1;

struct PLUGIN_Profiler;        // pjrt/profiler.cc
struct PLUGIN_Profiler_Error;  // pjrt/profiler.cc

struct PLUGIN_Profiler_Error_Destroy_Args {
  size_t struct_size;
  void* priv;
  PLUGIN_Profiler_Error* error;
};
struct PLUGIN_Profiler_Error_Message_Args {
  size_t struct_size;
  void* priv;
  const PLUGIN_Profiler_Error* error;
  const char* message;  // out: lives as long as `error`
  size_t message_size;  // out
};
struct PLUGIN_Profiler_Error_GetCode_Args {
  size_t struct_size;
  void* priv;
  const PLUGIN_Profiler_Error* error;
  int code;  // out: absl::StatusCode's numbering
};
struct PLUGIN_Profiler_Create_Args {
  size_t struct_size;
  const char* options;  // a serialized tensorflow.ProfileOptions (unread)
  size_t options_size;
  PLUGIN_Profiler* profiler;  // out
};
// Destroy, Start and Stop take the same two fields.
struct PLUGIN_Profiler_Destroy_Args {
  size_t struct_size;
  PLUGIN_Profiler* profiler;
};
struct PLUGIN_Profiler_Start_Args {
  size_t struct_size;
  PLUGIN_Profiler* profiler;
};
struct PLUGIN_Profiler_Stop_Args {
  size_t struct_size;
  PLUGIN_Profiler* profiler;
};
struct PLUGIN_Profiler_CollectData_Args {
  size_t struct_size;
  PLUGIN_Profiler* profiler;
  uint8_t* buffer;              // in/out (see the contract above)
  size_t buffer_size_in_bytes;  // out
};

struct PLUGIN_Profiler_Api {
  size_t struct_size;  // 80: offset of collect_data + 8
  void* priv;
  void (*error_destroy)(PLUGIN_Profiler_Error_Destroy_Args* args);
  void (*error_message)(PLUGIN_Profiler_Error_Message_Args* args);
  PLUGIN_Profiler_Error* (*error_get_code)(
      PLUGIN_Profiler_Error_GetCode_Args* args);
  PLUGIN_Profiler_Error* (*create)(PLUGIN_Profiler_Create_Args* args);
  PLUGIN_Profiler_Error* (*destroy)(PLUGIN_Profiler_Destroy_Args* args);
  PLUGIN_Profiler_Error* (*start)(PLUGIN_Profiler_Start_Args* args);
  PLUGIN_Profiler_Error* (*stop)(PLUGIN_Profiler_Stop_Args* args);
  PLUGIN_Profiler_Error* (*collect_data)(
      PLUGIN_Profiler_CollectData_Args* args);
};

// The chain link: PJRT_Extension_Base's three fields, then the table and a
// TraceMe context id (used only when the struct is an argument extension).
struct PJRT_Profiler_Extension {
  PJRT_Extension_Base base;
  PLUGIN_Profiler_Api* profiler_api;
  int64_t traceme_context_id;
};

}  // extern "C"

static_assert(sizeof(PLUGIN_Profiler_Api) == 80);
static_assert(offsetof(PLUGIN_Profiler_Api, collect_data) == 72);
static_assert(sizeof(PLUGIN_Profiler_Create_Args) == 32);
static_assert(sizeof(PLUGIN_Profiler_CollectData_Args) == 32);
static_assert(offsetof(PLUGIN_Profiler_CollectData_Args, buffer) == 16);
static_assert(sizeof(PLUGIN_Profiler_Error_Message_Args) == 40);
static_assert(offsetof(PLUGIN_Profiler_Error_GetCode_Args, code) == 24);
static_assert(sizeof(PJRT_Profiler_Extension) == 40);
static_assert(offsetof(PJRT_Profiler_Extension, profiler_api) == 24);

#endif  // TPUMESH_PJRT_PROFILER_C_API_H_
