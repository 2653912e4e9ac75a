// The PJRT C API table (pjrt/pjrt_c_api.h, pjrt/api.cc): its version, every
// slot filled, unimplemented slots answering UNIMPLEMENTED with the
// function's name, and the client's devices as JAX reads them; then the
// same table loaded from the plugin's shared object, as JAX loads it.
#include <dlfcn.h>

#include <cstring>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pjrt/compile_options.h"
#include "pjrt/pjrt_c_api.h"
#include "tests/testing/pjrt_api.h"

namespace {

using namespace tpumesh::pjrt::testing;  // NOLINT: the tests' helpers

void ExpectFullTable(const PJRT_Api& api) {
  EXPECT_EQ(api.struct_size, sizeof(PJRT_Api));
  EXPECT_EQ(api.pjrt_api_version.major_version, 0);
  EXPECT_EQ(api.pjrt_api_version.minor_version, 91);
  // Every slot, read as the raw pointers the framework reads.
  const auto* slots = reinterpret_cast<void* const*>(reinterpret_cast<const char*>(&api) + 40);
  for (int i = 0; i < kPjrtApiSlotCount; ++i) EXPECT_NE(slots[i], nullptr) << "slot " << i;
}

TEST(PjrtApiTest, VersionAndEverySlot) { ExpectFullTable(*GetPjrtApi()); }

TEST(PjrtApiTest, UnimplementedSlotsSayWhich) {
  const PJRT_Api& api = *GetPjrtApi();
  PJRT_Error* error = api.PJRT_Executable_Serialize(nullptr);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(Message(api, error), "tpumesh: PJRT_Executable_Serialize is not implemented");
  auto code = Make<PJRT_Error_GetCode_Args>();
  code.error = error;
  ExpectOk(api, api.PJRT_Error_GetCode(&code));
  EXPECT_EQ(code.code, PJRT_Error_Code_UNIMPLEMENTED);
  auto d = Make<PJRT_Error_Destroy_Args>();
  d.error = error;
  api.PJRT_Error_Destroy(&d);
}

TEST(PjrtApiTest, StablehloVersionAttributes) {
  const PJRT_Api& api = *GetPjrtApi();
  auto a = Make<PJRT_Plugin_Attributes_Args>();
  ExpectOk(api, api.PJRT_Plugin_Attributes(&a));
  ASSERT_EQ(a.num_attributes, 2u);
  EXPECT_EQ(std::string(a.attributes[0].name, a.attributes[0].name_size), "stablehlo_current_version");
  EXPECT_EQ(a.attributes[0].type, PJRT_NamedValue_kInt64List);
  EXPECT_EQ(a.attributes[0].value_size, 3u);
}

TEST(PjrtApiTest, ShortArgumentStructIsRefused) {
  const PJRT_Api& api = *GetPjrtApi();
  auto a = Make<PJRT_Plugin_Attributes_Args>();
  a.struct_size = 16;
  PJRT_Error* error = api.PJRT_Plugin_Attributes(&a);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(Message(api, error).find("argument struct of 16 bytes"), std::string::npos);
  auto d = Make<PJRT_Error_Destroy_Args>();
  d.error = error;
  api.PJRT_Error_Destroy(&d);
}

TEST(PjrtApiTest, DefaultClientIsAV5e2x4) {
  const PJRT_Api& api = *GetPjrtApi();
  ExpectOk(api, api.PJRT_Plugin_Initialize(nullptr));
  unsetenv("TPUMESH_PJRT_CHIP");
  unsetenv("TPUMESH_PJRT_DEVICES");
  unsetenv("TPUMESH_PJRT_TOPOLOGY");
  auto c = Make<PJRT_Client_Create_Args>();
  ExpectOk(api, api.PJRT_Client_Create(&c));
  ASSERT_NE(c.client, nullptr);
  auto name = Make<PJRT_Client_PlatformName_Args>();
  name.client = c.client;
  ExpectOk(api, api.PJRT_Client_PlatformName(&name));
  EXPECT_EQ(std::string(name.platform_name, name.platform_name_size), "tpumesh");
  auto devices = Make<PJRT_Client_Devices_Args>();
  devices.client = c.client;
  ExpectOk(api, api.PJRT_Client_Devices(&devices));
  ASSERT_EQ(devices.num_devices, 8u);
  std::vector<std::vector<int64_t>> coords;
  for (size_t i = 0; i < devices.num_devices; ++i) {
    auto g = Make<PJRT_Device_GetDescription_Args>();
    g.device = devices.devices[i];
    ExpectOk(api, api.PJRT_Device_GetDescription(&g));
    auto id = Make<PJRT_DeviceDescription_Id_Args>();
    id.device_description = g.device_description;
    ExpectOk(api, api.PJRT_DeviceDescription_Id(&id));
    EXPECT_EQ(id.id, static_cast<int>(i));
    auto kind = Make<PJRT_DeviceDescription_Kind_Args>();
    kind.device_description = g.device_description;
    ExpectOk(api, api.PJRT_DeviceDescription_Kind(&kind));
    EXPECT_EQ(std::string(kind.device_kind, kind.device_kind_size), "TPU v5 lite");
    auto attrs = Make<PJRT_DeviceDescription_Attributes_Args>();
    attrs.device_description = g.device_description;
    ExpectOk(api, api.PJRT_DeviceDescription_Attributes(&attrs));
    ASSERT_EQ(attrs.num_attributes, 2u);
    EXPECT_EQ(std::string(attrs.attributes[0].name, attrs.attributes[0].name_size), "coords");
    const PJRT_NamedValue& v = attrs.attributes[0];
    coords.emplace_back(v.int64_array_value, v.int64_array_value + v.value_size);
    auto stats = Make<PJRT_Device_MemoryStats_Args>();
    stats.device = devices.devices[i];
    ExpectOk(api, api.PJRT_Device_MemoryStats(&stats));
    EXPECT_TRUE(stats.bytes_limit_is_set);
    EXPECT_EQ(stats.bytes_limit, int64_t{16} << 30);  // v5e: 16 GiB of HBM per chip, one device per chip
    auto lookup = Make<PJRT_Client_LookupDevice_Args>();
    lookup.client = c.client;
    lookup.id = static_cast<int>(i);
    ExpectOk(api, api.PJRT_Client_LookupDevice(&lookup));
    EXPECT_EQ(lookup.device, devices.devices[i]);
  }
  // A 2x4 slice, first axis fastest.
  const std::vector<std::vector<int64_t>> expected = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {1, 1, 0},
                                                      {0, 2, 0}, {1, 2, 0}, {0, 3, 0}, {1, 3, 0}};
  EXPECT_EQ(coords, expected);
  auto lookup = Make<PJRT_Client_LookupDevice_Args>();
  lookup.client = c.client;
  lookup.id = 8;
  PJRT_Error* error = api.PJRT_Client_LookupDevice(&lookup);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(Message(api, error), "tpumesh: no device with id 8 (the client has 8)");
  auto d = Make<PJRT_Error_Destroy_Args>();
  d.error = error;
  api.PJRT_Error_Destroy(&d);
  auto destroy = Make<PJRT_Client_Destroy_Args>();
  destroy.client = c.client;
  ExpectOk(api, api.PJRT_Client_Destroy(&destroy));
}

TEST(PjrtApiTest, EnvironmentPicksChipAndTopology) {
  const PJRT_Api& api = *GetPjrtApi();
  setenv("TPUMESH_PJRT_TOPOLOGY", "2x2", 1);
  auto c = Make<PJRT_Client_Create_Args>();
  ExpectOk(api, api.PJRT_Client_Create(&c));
  unsetenv("TPUMESH_PJRT_TOPOLOGY");
  ASSERT_NE(c.client, nullptr);
  auto devices = Make<PJRT_Client_Devices_Args>();
  devices.client = c.client;
  ExpectOk(api, api.PJRT_Client_Devices(&devices));
  EXPECT_EQ(devices.num_devices, 4u);
  auto destroy = Make<PJRT_Client_Destroy_Args>();
  destroy.client = c.client;
  ExpectOk(api, api.PJRT_Client_Destroy(&destroy));

  setenv("TPUMESH_PJRT_DEVICES", "zero", 1);
  auto bad = Make<PJRT_Client_Create_Args>();
  PJRT_Error* error = api.PJRT_Client_Create(&bad);
  unsetenv("TPUMESH_PJRT_DEVICES");
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(Message(api, error), "TPUMESH_PJRT_DEVICES must be a device count from 1 to 1024, got 'zero'");
  auto d = Make<PJRT_Error_Destroy_Args>();
  d.error = error;
  api.PJRT_Error_Destroy(&d);
}

// TPUMESH_PJRT_CHIP=tpu7x: a v7-8, 8 devices (one per chiplet) on 4 chips,
// each with half the chip's HBM; v6e and v5p name their device kinds.
TEST(PjrtApiTest, EnvironmentPicksTheNewerChips) {
  const PJRT_Api& api = *GetPjrtApi();
  struct Case {
    const char* chip;
    const char* topology;
    size_t devices;
    const char* kind;
    int64_t bytes_limit;
    int cores_per_chip;
  };
  for (const Case& k : {Case{"tpu7x", "", 8, "TPU7x", int64_t{96} << 30, 2},
                        Case{"v6e", "", 8, "TPU v6 lite", int64_t{32} << 30, 1},
                        Case{"v5p", "2x2x1", 4, "TPU v5", int64_t{95} << 30, 1}}) {
    setenv("TPUMESH_PJRT_CHIP", k.chip, 1);
    if (*k.topology) setenv("TPUMESH_PJRT_TOPOLOGY", k.topology, 1);
    auto c = Make<PJRT_Client_Create_Args>();
    ExpectOk(api, api.PJRT_Client_Create(&c));
    unsetenv("TPUMESH_PJRT_CHIP");
    unsetenv("TPUMESH_PJRT_TOPOLOGY");
    ASSERT_NE(c.client, nullptr) << k.chip;
    auto devices = Make<PJRT_Client_Devices_Args>();
    devices.client = c.client;
    ExpectOk(api, api.PJRT_Client_Devices(&devices));
    ASSERT_EQ(devices.num_devices, k.devices) << k.chip;
    for (size_t i = 0; i < devices.num_devices; ++i) {
      auto g = Make<PJRT_Device_GetDescription_Args>();
      g.device = devices.devices[i];
      ExpectOk(api, api.PJRT_Device_GetDescription(&g));
      auto kind = Make<PJRT_DeviceDescription_Kind_Args>();
      kind.device_description = g.device_description;
      ExpectOk(api, api.PJRT_DeviceDescription_Kind(&kind));
      EXPECT_EQ(std::string(kind.device_kind, kind.device_kind_size), k.kind);
      auto attrs = Make<PJRT_DeviceDescription_Attributes_Args>();
      attrs.device_description = g.device_description;
      ExpectOk(api, api.PJRT_DeviceDescription_Attributes(&attrs));
      ASSERT_EQ(attrs.num_attributes, 2u);
      const PJRT_NamedValue& coords = attrs.attributes[0];
      const PJRT_NamedValue& core = attrs.attributes[1];
      EXPECT_EQ(std::string(core.name, core.name_size), "core_on_chip");
      EXPECT_EQ(core.int64_value, static_cast<int64_t>(i) % k.cores_per_chip) << k.chip << " device " << i;
      // Both chiplets of a chip sit at its coordinates; every slice here is
      // 2 chips wide, so chip c = i / cores is at (c % 2, c / 2, 0).
      const int64_t chip = static_cast<int64_t>(i) / k.cores_per_chip;
      EXPECT_EQ(std::vector<int64_t>(coords.int64_array_value, coords.int64_array_value + coords.value_size),
                (std::vector<int64_t>{chip % 2, chip / 2, 0}))
          << k.chip << " device " << i;
      auto stats = Make<PJRT_Device_MemoryStats_Args>();
      stats.device = devices.devices[i];
      ExpectOk(api, api.PJRT_Device_MemoryStats(&stats));
      EXPECT_EQ(stats.bytes_limit, k.bytes_limit) << k.chip;
    }
    auto destroy = Make<PJRT_Client_Destroy_Args>();
    destroy.client = c.client;
    ExpectOk(api, api.PJRT_Client_Destroy(&destroy));
  }
}

#ifdef TPUMESH_PJRT_PLUGIN
// The shared object exports GetPjrtApi and nothing of ours besides.
TEST(PjrtApiTest, PluginSharedObjectExportsTheTable) {
  void* handle = dlopen(TPUMESH_PJRT_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  using GetApi = const PJRT_Api* (*)();
  auto get = reinterpret_cast<GetApi>(dlsym(handle, "GetPjrtApi"));
  ASSERT_NE(get, nullptr) << dlerror();
  ExpectFullTable(*get());
  EXPECT_EQ(dlsym(handle, "_ZN7tpumesh4pjrt12CreateClientERKNS_4mesh8MeshSpecE"), nullptr);
}
#endif

}  // namespace

namespace {

TEST(PjrtBufferTest, HostToDeviceAndBack) {
  TestClient c(*GetPjrtApi());
  const std::vector<float> x = {0, 1, 2, 3, 4, 5};
  PJRT_Error* error = nullptr;
  PJRT_Buffer* b = FromHost(c, x.data(), PJRT_Buffer_Type_F32, {2, 3}, {}, 3, &error);
  ExpectOk(c.api, error);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(c.BytesInUse(3), 24);
  auto dims = Make<PJRT_Buffer_Dimensions_Args>();
  dims.buffer = b;
  ExpectOk(c.api, c.api.PJRT_Buffer_Dimensions(&dims));
  EXPECT_EQ(std::vector<int64_t>(dims.dims, dims.dims + dims.num_dims), (std::vector<int64_t>{2, 3}));
  auto type = Make<PJRT_Buffer_ElementType_Args>();
  type.buffer = b;
  ExpectOk(c.api, c.api.PJRT_Buffer_ElementType(&type));
  EXPECT_EQ(type.type, PJRT_Buffer_Type_F32);
  auto device = Make<PJRT_Buffer_Device_Args>();
  device.buffer = b;
  ExpectOk(c.api, c.api.PJRT_Buffer_Device(&device));
  EXPECT_EQ(device.device, c.devices[3]);
  EXPECT_EQ(ToHost<float>(c, b), x);
  auto pointer = Make<PJRT_Buffer_UnsafePointer_Args>();
  pointer.buffer = b;
  ExpectOk(c.api, c.api.PJRT_Buffer_UnsafePointer(&pointer));
  ASSERT_NE(pointer.buffer_pointer, 0u);  // the buffer's own bytes
  EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(pointer.buffer_pointer), x.data(), 24), 0);
  auto del = Make<PJRT_Buffer_Delete_Args>();
  del.buffer = b;
  ExpectOk(c.api, c.api.PJRT_Buffer_Delete(&del));
  EXPECT_EQ(c.BytesInUse(3), 0);
  auto deleted = Make<PJRT_Buffer_IsDeleted_Args>();
  deleted.buffer = b;
  ExpectOk(c.api, c.api.PJRT_Buffer_IsDeleted(&deleted));
  EXPECT_TRUE(deleted.is_deleted);
  DestroyBuffer(c.api, b);
}

TEST(PjrtBufferTest, CopyToAnotherDevice) {
  TestClient c(*GetPjrtApi());
  const std::vector<double> x = {1.5, -2.5, 3.25};
  PJRT_Error* error = nullptr;
  PJRT_Buffer* b = FromHost(c, x.data(), PJRT_Buffer_Type_F64, {3}, {}, 1, &error);
  ExpectOk(c.api, error);
  auto copy = Make<PJRT_Buffer_CopyToDevice_Args>();
  copy.buffer = b;
  copy.dst_device = c.devices[6];
  ExpectOk(c.api, c.api.PJRT_Buffer_CopyToDevice(&copy));
  ASSERT_NE(copy.dst_buffer, nullptr);
  EXPECT_EQ(c.BytesInUse(1), 24);
  EXPECT_EQ(c.BytesInUse(6), 24);
  auto device = Make<PJRT_Buffer_Device_Args>();
  device.buffer = copy.dst_buffer;
  ExpectOk(c.api, c.api.PJRT_Buffer_Device(&device));
  EXPECT_EQ(device.device, c.devices[6]);
  EXPECT_EQ(ToHost<double>(c, copy.dst_buffer), x);
  DestroyBuffer(c.api, copy.dst_buffer);
  DestroyBuffer(c.api, b);
  EXPECT_EQ(c.BytesInUse(1) + c.BytesInUse(6), 0);
}

TEST(PjrtBufferTest, StridedHostArrayIsGatheredRowMajor) {
  TestClient c(*GetPjrtApi());
  // A 3x2 view of a 2x3 int32 array's transpose: strides (4, 12).
  const std::vector<int32_t> x = {0, 1, 2, 3, 4, 5};
  PJRT_Error* error = nullptr;
  PJRT_Buffer* b = FromHost(c, x.data(), PJRT_Buffer_Type_S32, {3, 2}, {4, 12}, 0, &error);
  ExpectOk(c.api, error);
  EXPECT_EQ(ToHost<int32_t>(c, b), (std::vector<int32_t>{0, 3, 1, 4, 2, 5}));
  DestroyBuffer(c.api, b);
}

TEST(PjrtBufferTest, TooLargeForHbmIsResourceExhausted) {
  TestClient c(*GetPjrtApi());
  const float one = 1;
  PJRT_Error* error = nullptr;
  // 2^33 f32 elements (32 GiB) from a zero-stride host view: more than a v5e's 16 GiB.
  PJRT_Buffer* b = FromHost(c, &one, PJRT_Buffer_Type_F32, {int64_t{1} << 33}, {0}, 5, &error);
  EXPECT_EQ(b, nullptr);
  ASSERT_NE(error, nullptr);
  auto code = Make<PJRT_Error_GetCode_Args>();
  code.error = error;
  ExpectOk(c.api, c.api.PJRT_Error_GetCode(&code));
  EXPECT_EQ(code.code, PJRT_Error_Code_RESOURCE_EXHAUSTED);
  EXPECT_NE(Message(c.api, error).find("device 5"), std::string::npos) << Message(c.api, error);
  auto d = Make<PJRT_Error_Destroy_Args>();
  d.error = error;
  c.api.PJRT_Error_Destroy(&d);
  EXPECT_EQ(c.BytesInUse(5), 0);
}

}  // namespace

namespace {

// ---- Compile and execute (pjrt/executable.h). Programs as MLIR text: no
// decoder is needed for text (the bytecode path is python/tests/test_pjrt.py).

constexpr char kAddOne[] =
    "module @jit_add_one {\n"
    "  func.func public @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>) {\n"
    "    %c = stablehlo.constant dense<1.0> : tensor<2x3xf32>\n"
    "    %y = stablehlo.add %x, %c : tensor<2x3xf32>\n"
    "    return %y : tensor<2x3xf32>\n"
    "  }\n"
    "}\n";

TEST(PjrtCompileOptionsTest, DeviceAssignmentRoundTrips) {
  const auto o = tpumesh::pjrt::ParseCompileOptions(OptionsOnDevices({5, 1, 7}));
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->num_replicas, 1);
  EXPECT_EQ(o->num_partitions, 3);
  EXPECT_EQ(o->devices, (std::vector<std::vector<int64_t>>{{5, 1, 7}}));
  const auto bad = tpumesh::pjrt::ParseCompileOptions(std::string("\x1a\x7f", 2));  // a length past the end
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a CompileOptionsProto: a length past the end"), std::string::npos);
}

TEST(PjrtCompileOptionsTest, OpShardingWritesSubgroupsAsXlaDoes) {
  using tpumesh::pjrt::SerializeOpSharding;
  // Nothing split: REPLICATED (type 0).
  EXPECT_EQ(SerializeOpSharding({1, 1}, 4, 1, {}), std::string("\x08\x00", 2));
  // Split 2 ways, 2 copies: OTHER, dims [2,2], devices 0..3, replicate_on_last_tile_dim.
  EXPECT_EQ(SerializeOpSharding({2}, 2, 1, {0, 1, 2, 3}),
            std::string("\x08\x03\x1a\x02\x02\x02\x22\x04\x00\x01\x02\x03\x30\x01", 14));
  // Unreduced over 2 devices, nothing split: OTHER, dims [1,2], last_tile_dims [UNREDUCED].
  EXPECT_EQ(SerializeOpSharding({1}, 1, 2, {0, 1}),
            std::string("\x08\x03\x1a\x02\x01\x02\x22\x02\x00\x01\x42\x01\x06", 13));
  // Copies and unreduced: last_tile_dims [REPLICATED, UNREDUCED].
  EXPECT_EQ(SerializeOpSharding({1}, 2, 2, {0, 1, 2, 3}),
            std::string("\x08\x03\x1a\x03\x01\x02\x02\x22\x04\x00\x01\x02\x03\x42\x02\x00\x06", 17));
}

TEST(PjrtExecutableTest, CompilesAndRunsOnTheAssignedDevice) {
  TestClient c(*GetPjrtApi());
  PJRT_Error* error = nullptr;
  PJRT_LoadedExecutable* exe = Compile(c, kAddOne, OptionsOnDevices({6}), &error);
  ExpectOk(c.api, error);
  ASSERT_NE(exe, nullptr);
  auto devices = Make<PJRT_LoadedExecutable_AddressableDevices_Args>();
  devices.executable = exe;
  ExpectOk(c.api, c.api.PJRT_LoadedExecutable_AddressableDevices(&devices));
  ASSERT_EQ(devices.num_addressable_devices, 1u);
  EXPECT_EQ(devices.addressable_devices[0], c.devices[6]);

  const std::vector<float> x = {0, 1, 2, 3, 4, 5};
  PJRT_Buffer* in = FromHost(c, x.data(), PJRT_Buffer_Type_F32, {2, 3}, {}, 6, &error);
  ExpectOk(c.api, error);
  PJRT_Buffer* out = nullptr;
  PJRT_Buffer* const args_row[] = {in};
  PJRT_Buffer* const* arg_lists[] = {args_row};
  PJRT_Buffer** out_lists[] = {&out};
  PJRT_Event* done = nullptr;
  auto options = Make<PJRT_ExecuteOptions>();
  auto run = Make<PJRT_LoadedExecutable_Execute_Args>();
  run.executable = exe;
  run.options = &options;
  run.argument_lists = arg_lists;
  run.num_devices = 1;
  run.num_args = 1;
  run.output_lists = out_lists;
  run.device_complete_events = &done;
  ExpectOk(c.api, c.api.PJRT_LoadedExecutable_Execute(&run));
  ASSERT_NE(out, nullptr);
  DestroyEvent(c.api, done);
  EXPECT_EQ(ToHost<float>(c, out), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  auto device = Make<PJRT_Buffer_Device_Args>();
  device.buffer = out;
  ExpectOk(c.api, c.api.PJRT_Buffer_Device(&device));
  EXPECT_EQ(device.device, c.devices[6]);
  EXPECT_EQ(c.BytesInUse(6), 48);  // the argument and the result

  // The priced figures: 6 adds, and our modelled seconds.
  std::map<std::string, float> figures = CostFigures(c, exe);
  EXPECT_EQ(figures["flops"], 6);
  EXPECT_GT(figures["tpumesh_modelled_seconds"], 0);

  DestroyBuffer(c.api, in);
  DestroyBuffer(c.api, out);
  auto destroy = Make<PJRT_LoadedExecutable_Destroy_Args>();
  destroy.executable = exe;
  ExpectOk(c.api, c.api.PJRT_LoadedExecutable_Destroy(&destroy));
}

TEST(PjrtExecutableTest, UnsupportedOpIsOneLineNamingItsPlace) {
  TestClient c(*GetPjrtApi());
  const std::string text =
      "module @jit_f {\n"
      "  func.func public @main(%x: tensor<4xf32>) -> (tensor<4xf32>) {\n"
      "    %y = stablehlo.frobnicate %x : tensor<4xf32>\n"
      "    return %y : tensor<4xf32>\n"
      "  }\n"
      "}\n";
  PJRT_Error* error = nullptr;
  PJRT_LoadedExecutable* exe = Compile(c, text, OptionsOnDevices({0}), &error);
  EXPECT_EQ(exe, nullptr);
  ASSERT_NE(error, nullptr);
  const std::string m = Message(c.api, error);
  EXPECT_EQ(m.find("jit_f.mlir:3:"), 0u) << m;
  EXPECT_NE(m.find("stablehlo.frobnicate"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  auto d = Make<PJRT_Error_Destroy_Args>();
  d.error = error;
  c.api.PJRT_Error_Destroy(&d);
}

TEST(PjrtExecutableTest, BytecodeWithoutADecoderIsRefused) {
  TestClient c(*GetPjrtApi());
  PJRT_Error* error = nullptr;
  PJRT_LoadedExecutable* exe = Compile(c, std::string("ML\xefR\x00\x01", 6), OptionsOnDevices({0}), &error);
  EXPECT_EQ(exe, nullptr);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(Message(c.api, error).find("no decoder is installed"), std::string::npos);
  auto d = Make<PJRT_Error_Destroy_Args>();
  d.error = error;
  c.api.PJRT_Error_Destroy(&d);
}

}  // namespace
