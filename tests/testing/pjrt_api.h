// Helpers of the PJRT tests: argument structs as the framework fills them,
// a client, buffers to and from the host, compile options and programs.
#ifndef TPUMESH_TESTS_TESTING_PJRT_API_H_
#define TPUMESH_TESTS_TESTING_PJRT_API_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pjrt/compile_options.h"
#include "pjrt/pjrt_c_api.h"

namespace tpumesh::pjrt::testing {

template <typename Args>
Args Make() {
  Args args{};
  args.struct_size = kPjrtStructSize<Args>;  // what the framework passes
  return args;
}

inline std::string Message(const PJRT_Api& api, PJRT_Error* error) {
  auto m = Make<PJRT_Error_Message_Args>();
  m.error = error;
  api.PJRT_Error_Message(&m);
  return std::string(m.message, m.message_size);
}

inline void ExpectOk(const PJRT_Api& api, PJRT_Error* error) {
  if (error == nullptr) return;
  ADD_FAILURE() << Message(api, error);
  auto d = Make<PJRT_Error_Destroy_Args>();
  d.error = error;
  api.PJRT_Error_Destroy(&d);
}

struct TestClient {
  explicit TestClient(const PJRT_Api& api) : api(api) {
    auto c = Make<PJRT_Client_Create_Args>();
    ExpectOk(api, api.PJRT_Client_Create(&c));
    client = c.client;
    auto d = Make<PJRT_Client_Devices_Args>();
    d.client = client;
    ExpectOk(api, api.PJRT_Client_Devices(&d));
    devices.assign(d.devices, d.devices + d.num_devices);
  }
  ~TestClient() {
    auto d = Make<PJRT_Client_Destroy_Args>();
    d.client = client;
    ExpectOk(api, api.PJRT_Client_Destroy(&d));
  }
  int64_t BytesInUse(int device) {
    auto s = Make<PJRT_Device_MemoryStats_Args>();
    s.device = devices[device];
    ExpectOk(api, api.PJRT_Device_MemoryStats(&s));
    return s.bytes_in_use;
  }
  const PJRT_Api& api;
  PJRT_Client* client = nullptr;
  std::vector<PJRT_Device*> devices;
};

inline void DestroyEvent(const PJRT_Api& api, PJRT_Event* event) {
  auto e = Make<PJRT_Event_Destroy_Args>();
  e.event = event;
  ExpectOk(api, api.PJRT_Event_Destroy(&e));
}

inline PJRT_Buffer* FromHost(TestClient& c, const void* data, PJRT_Buffer_Type type, std::vector<int64_t> dims,
                      std::vector<int64_t> strides, int device, PJRT_Error** error) {
  auto a = Make<PJRT_Client_BufferFromHostBuffer_Args>();
  a.client = c.client;
  a.data = data;
  a.type = type;
  a.dims = dims.data();
  a.num_dims = dims.size();
  a.byte_strides = strides.empty() ? nullptr : strides.data();
  a.num_byte_strides = strides.size();
  a.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  a.device = c.devices[device];
  *error = c.api.PJRT_Client_BufferFromHostBuffer(&a);
  if (*error == nullptr) DestroyEvent(c.api, a.done_with_host_buffer);
  return a.buffer;
}

template <typename T>
std::vector<T> ToHost(TestClient& c, PJRT_Buffer* buffer) {
  auto size = Make<PJRT_Buffer_ToHostBuffer_Args>();
  size.src = buffer;
  ExpectOk(c.api, c.api.PJRT_Buffer_ToHostBuffer(&size));
  std::vector<T> out(size.dst_size / sizeof(T));
  auto a = Make<PJRT_Buffer_ToHostBuffer_Args>();
  a.src = buffer;
  a.dst = out.data();
  a.dst_size = out.size() * sizeof(T);
  ExpectOk(c.api, c.api.PJRT_Buffer_ToHostBuffer(&a));
  auto ready = Make<PJRT_Event_IsReady_Args>();
  ready.event = a.event;
  ExpectOk(c.api, c.api.PJRT_Event_IsReady(&ready));
  EXPECT_TRUE(ready.is_ready);
  auto await = Make<PJRT_Event_Await_Args>();
  await.event = a.event;
  ExpectOk(c.api, c.api.PJRT_Event_Await(&await));
  DestroyEvent(c.api, a.event);
  return out;
}

inline void DestroyBuffer(const PJRT_Api& api, PJRT_Buffer* buffer) {
  auto d = Make<PJRT_Buffer_Destroy_Args>();
  d.buffer = buffer;
  ExpectOk(api, api.PJRT_Buffer_Destroy(&d));
}

// A CompileOptionsProto whose device assignment is one replica of the
// given partitions (what jax.jit sends), written field by field.
inline std::string OptionsOnDevices(const std::vector<int64_t>& devices) {
  std::vector<std::vector<int64_t>> da(1, devices);
  const std::string assignment = tpumesh::pjrt::SerializeDeviceAssignment(da);
  std::string build;
  build += static_cast<char>((4 << 3) | 0);  // num_replicas = 1
  build += static_cast<char>(1);
  build += static_cast<char>((5 << 3) | 0);  // num_partitions
  build += static_cast<char>(devices.size());
  build += static_cast<char>((9 << 3) | 2);  // device_assignment
  build += static_cast<char>(assignment.size());
  build += assignment;
  std::string options;
  options += static_cast<char>((3 << 3) | 2);  // executable_build_options
  options += static_cast<char>(build.size());
  options += build;
  return options;
}

inline PJRT_LoadedExecutable* Compile(TestClient& c, const std::string& text, const std::string& options,
                               PJRT_Error** error) {
  auto program = Make<PJRT_Program>();
  program.code = const_cast<char*>(text.data());
  program.code_size = text.size();
  program.format = "mlir";
  program.format_size = 4;
  auto a = Make<PJRT_Client_Compile_Args>();
  a.client = c.client;
  a.program = &program;
  a.compile_options = options.data();
  a.compile_options_size = options.size();
  *error = c.api.PJRT_Client_Compile(&a);
  return a.executable;
}

// The executable's cost_analysis (PJRT_Executable_GetCostAnalysis) by name.
inline std::map<std::string, float> CostFigures(TestClient& c, PJRT_LoadedExecutable* exe) {
  auto get = Make<PJRT_LoadedExecutable_GetExecutable_Args>();
  get.loaded_executable = exe;
  ExpectOk(c.api, c.api.PJRT_LoadedExecutable_GetExecutable(&get));
  auto cost = Make<PJRT_Executable_GetCostAnalysis_Args>();
  cost.executable = get.executable;
  ExpectOk(c.api, c.api.PJRT_Executable_GetCostAnalysis(&cost));
  std::map<std::string, float> figures;
  for (size_t i = 0; i < cost.num_properties; ++i)
    figures[std::string(cost.properties[i].name, cost.properties[i].name_size)] = cost.properties[i].float_value;
  auto destroy = Make<PJRT_Executable_Destroy_Args>();
  destroy.executable = get.executable;
  ExpectOk(c.api, c.api.PJRT_Executable_Destroy(&destroy));
  return figures;
}

}  // namespace tpumesh::pjrt::testing

#endif  // TPUMESH_TESTS_TESTING_PJRT_API_H_
