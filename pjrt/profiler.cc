#include "pjrt/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "pjrt/profiler_c_api.h"

struct PLUGIN_Profiler {
  std::mutex mutex;
  bool started = false;
  std::vector<tpumesh::pjrt::ProfiledExecution> executions;
  bool collected = false;
  std::string bytes;  // the XSpace, once collected
};

struct PLUGIN_Profiler_Error {
  tpumesh::Status status;
};

namespace tpumesh::pjrt {
namespace {

// The started sessions.
std::mutex g_sessions_mutex;
std::vector<PLUGIN_Profiler*>* g_sessions =
    new std::vector<PLUGIN_Profiler*>;  // never destroyed
std::atomic<int> g_started{0};

PLUGIN_Profiler_Error* Error(Status s) {
  return new PLUGIN_Profiler_Error{std::move(s)};
}

PLUGIN_Profiler_Error* NoProfiler(const char* function) {
  return Error(InvalidArgumentError(std::string("tpumesh: ") + function +
                                    ": no profiler"));
}

void ErrorDestroy(PLUGIN_Profiler_Error_Destroy_Args* args) {
  if (args != nullptr) delete args->error;
}

void ErrorMessage(PLUGIN_Profiler_Error_Message_Args* args) {
  if (args == nullptr || args->error == nullptr) return;
  const std::string& m = args->error->status.message();
  args->message = m.data();
  args->message_size = m.size();
}

PLUGIN_Profiler_Error* ErrorGetCode(PLUGIN_Profiler_Error_GetCode_Args* args) {
  if (args == nullptr || args->error == nullptr)
    return Error(InvalidArgumentError("tpumesh: no profiler error"));
  args->code = static_cast<int>(args->error->status.code());
  return nullptr;
}

PLUGIN_Profiler_Error* Create(PLUGIN_Profiler_Create_Args* args) {
  if (args == nullptr) return NoProfiler("PLUGIN_Profiler_Create");
  args->profiler = new PLUGIN_Profiler;
  return nullptr;
}

void Unregister(PLUGIN_Profiler* p) {
  std::lock_guard<std::mutex> lock(g_sessions_mutex);
  auto it = std::find(g_sessions->begin(), g_sessions->end(), p);
  if (it == g_sessions->end()) return;
  g_sessions->erase(it);
  g_started.fetch_sub(1);
  p->started = false;
}

PLUGIN_Profiler_Error* Destroy(PLUGIN_Profiler_Destroy_Args* args) {
  if (args == nullptr || args->profiler == nullptr)
    return NoProfiler("PLUGIN_Profiler_Destroy");
  Unregister(args->profiler);
  delete args->profiler;
  return nullptr;
}

PLUGIN_Profiler_Error* Start(PLUGIN_Profiler_Start_Args* args) {
  if (args == nullptr || args->profiler == nullptr)
    return NoProfiler("PLUGIN_Profiler_Start");
  PLUGIN_Profiler* p = args->profiler;
  std::lock_guard<std::mutex> lock(g_sessions_mutex);
  if (std::find(g_sessions->begin(), g_sessions->end(), p) != g_sessions->end())
    return nullptr;  // already
  {
    std::lock_guard<std::mutex> own(p->mutex);
    p->started = true;
    p->executions.clear();
    p->collected = false;
    p->bytes.clear();
  }
  g_sessions->push_back(p);
  g_started.fetch_add(1);
  return nullptr;
}

PLUGIN_Profiler_Error* Stop(PLUGIN_Profiler_Stop_Args* args) {
  if (args == nullptr || args->profiler == nullptr)
    return NoProfiler("PLUGIN_Profiler_Stop");
  Unregister(args->profiler);
  return nullptr;
}

// The session's XSpace, serialized once (a session still started is
// stopped first: what ran so far is what it holds).
PLUGIN_Profiler_Error* CollectData(PLUGIN_Profiler_CollectData_Args* args) {
  if (args == nullptr || args->profiler == nullptr)
    return NoProfiler("PLUGIN_Profiler_CollectData");
  PLUGIN_Profiler* p = args->profiler;
  Unregister(p);
  std::lock_guard<std::mutex> lock(p->mutex);
  if (!p->collected) {
    p->bytes = SerializeXSpace(p->executions);
    p->executions.clear();
    p->collected = true;
  }
  if (args->buffer == nullptr) {
    args->buffer = reinterpret_cast<uint8_t*>(p->bytes.data());
  } else if (args->buffer != reinterpret_cast<uint8_t*>(p->bytes.data())) {
    std::memcpy(args->buffer, p->bytes.data(), p->bytes.size());
  }
  args->buffer_size_in_bytes = p->bytes.size();
  return nullptr;
}

}  // namespace

PJRT_Extension_Base* ProfilerExtension() {
  static PLUGIN_Profiler_Api api = [] {
    PLUGIN_Profiler_Api a{};
    a.struct_size = sizeof(PLUGIN_Profiler_Api);
    a.priv = nullptr;
    a.error_destroy = ErrorDestroy;
    a.error_message = ErrorMessage;
    a.error_get_code = ErrorGetCode;
    a.create = Create;
    a.destroy = Destroy;
    a.start = Start;
    a.stop = Stop;
    a.collect_data = CollectData;
    return a;
  }();
  static PJRT_Profiler_Extension extension = [] {
    PJRT_Profiler_Extension e{};
    e.base.struct_size = sizeof(PJRT_Profiler_Extension);
    e.base.type = static_cast<PJRT_Extension_Type>(kPjrtProfilerExtensionType);
    e.base.next = nullptr;
    e.profiler_api = &api;
    e.traceme_context_id = 0;
    return e;
  }();
  return &extension.base;
}

bool ProfilingActive() { return g_started.load(std::memory_order_relaxed) > 0; }

void RecordExecution(const ProfiledExecution& execution) {
  std::lock_guard<std::mutex> lock(g_sessions_mutex);
  for (PLUGIN_Profiler* p : *g_sessions) {
    std::lock_guard<std::mutex> own(p->mutex);
    p->executions.push_back(execution);
  }
}

int64_t WallNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace tpumesh::pjrt
