// GetPjrtApi: the PJRT C API table of the tpumesh plugin (pjrt/pjrt_c_api.h).
// Each implemented function checks its argument struct's size, does its
// work with Status inside and turns a failure into a PJRT_Error at the
// boundary; every other slot returns UNIMPLEMENTED naming the function.

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "base/status.h"
#include "pjrt/buffer.h"
#include "pjrt/c_boundary.h"
#include "pjrt/client.h"
#include "pjrt/executable.h"
#include "pjrt/pjrt_c_api.h"
#include "pjrt/profiler.h"

namespace tpumesh::pjrt {
namespace {

// ---- Errors

void ErrorDestroy(PJRT_Error_Destroy_Args* args) {
  if (args != nullptr) delete args->error;
}

void ErrorMessage(PJRT_Error_Message_Args* args) {
  if (args == nullptr || args->error == nullptr) return;
  const std::string& m = args->error->status.message();
  args->message = m.data();
  args->message_size = m.size();
}

PJRT_Error* ErrorGetCode(PJRT_Error_GetCode_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Error_GetCode");
  args->code = static_cast<PJRT_Error_Code>(static_cast<int>(args->error->status.code()));
  return nullptr;
}

// ---- Plugin

PJRT_Error* PluginInitialize(PJRT_Plugin_Initialize_Args* args) { return nullptr; }

// The StableHLO versions the plugin reads: programs are decoded by the
// jaxlib of the process (docs/pjrt.md, "Decoding programs"), which reads
// what it writes; the framework serializes at the lower of this and its own.
constexpr int64_t kStablehloCurrent[] = {1, 17, 0};
constexpr int64_t kStablehloMinimum[] = {0, 9, 0};

PJRT_NamedValue ListAttribute(const char* name, std::span<const int64_t> values) {
  PJRT_NamedValue v{};
  v.struct_size = sizeof(PJRT_NamedValue);
  v.name = name;
  v.name_size = std::char_traits<char>::length(name);
  v.type = PJRT_NamedValue_kInt64List;
  v.int64_array_value = values.data();
  v.value_size = values.size();
  return v;
}

PJRT_Error* PluginAttributes(PJRT_Plugin_Attributes_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Plugin_Attributes");
  static const PJRT_NamedValue kAttributes[] = {
      ListAttribute("stablehlo_current_version", kStablehloCurrent),
      ListAttribute("stablehlo_minimum_version", kStablehloMinimum),
  };
  args->attributes = kAttributes;
  args->num_attributes = std::size(kAttributes);
  return nullptr;
}

// ---- Client

PJRT_Error* ClientCreate(PJRT_Client_Create_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Client_Create");
  auto spec = MeshSpecFrom(std::span<const PJRT_NamedValue>(args->create_options, args->num_options));
  if (!spec.ok()) return ToError(spec.status());
  auto client = CreateClient(*spec);
  if (!client.ok()) return ToError(client.status());
  args->client = client->release();
  return nullptr;
}

PJRT_Error* ClientDestroy(PJRT_Client_Destroy_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Client_Destroy");
  delete args->client;
  return nullptr;
}

PJRT_Error* ClientPlatformName(PJRT_Client_PlatformName_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Client_PlatformName");
  args->platform_name = args->client->platform_name.data();
  args->platform_name_size = args->client->platform_name.size();
  return nullptr;
}

PJRT_Error* ClientProcessIndex(PJRT_Client_ProcessIndex_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Client_ProcessIndex");
  args->process_index = 0;
  return nullptr;
}

PJRT_Error* ClientPlatformVersion(PJRT_Client_PlatformVersion_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Client_PlatformVersion");
  args->platform_version = args->client->platform_version.data();
  args->platform_version_size = args->client->platform_version.size();
  return nullptr;
}

PJRT_Error* ClientDevices(PJRT_Client_Devices_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Client_Devices");
  args->devices = args->client->device_handles.data();
  args->num_devices = args->client->device_handles.size();
  return nullptr;
}

PJRT_Error* ClientAddressableDevices(PJRT_Client_AddressableDevices_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Client_AddressableDevices");
  args->addressable_devices = args->client->device_handles.data();
  args->num_addressable_devices = args->client->device_handles.size();
  return nullptr;
}

Status DeviceIndexOk(const PJRT_Client& client, int index, const char* what) {
  if (index < 0 || index >= static_cast<int>(client.device_handles.size()))
    return InvalidArgumentError(std::string("tpumesh: no device with ") + what + " " + std::to_string(index) +
                                " (the client has " + std::to_string(client.device_handles.size()) + ")");
  return OkStatus();
}

PJRT_Error* ClientLookupDevice(PJRT_Client_LookupDevice_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Client_LookupDevice");
  if (Status s = DeviceIndexOk(*args->client, args->id, "id"); !s.ok()) return ToError(s);
  args->device = args->client->device_handles[args->id];
  return nullptr;
}

PJRT_Error* ClientLookupAddressableDevice(PJRT_Client_LookupAddressableDevice_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Client_LookupAddressableDevice");
  if (Status s = DeviceIndexOk(*args->client, args->local_hardware_id, "local hardware id"); !s.ok())
    return ToError(s);
  args->addressable_device = args->client->device_handles[args->local_hardware_id];
  return nullptr;
}

PJRT_Error* ClientAddressableMemories(PJRT_Client_AddressableMemories_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Client_AddressableMemories");
  args->addressable_memories = args->client->memory_handles.data();
  args->num_addressable_memories = args->client->memory_handles.size();
  return nullptr;
}

// ---- DeviceDescription

PJRT_Error* DescriptionId(PJRT_DeviceDescription_Id_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_DeviceDescription_Id");
  args->id = args->device_description->id;
  return nullptr;
}

PJRT_Error* DescriptionProcessIndex(PJRT_DeviceDescription_ProcessIndex_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_DeviceDescription_ProcessIndex");
  args->process_index = args->device_description->process_index;
  return nullptr;
}

PJRT_Error* DescriptionAttributes(PJRT_DeviceDescription_Attributes_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_DeviceDescription_Attributes");
  args->attributes = args->device_description->attributes.data();
  args->num_attributes = args->device_description->attributes.size();
  return nullptr;
}

PJRT_Error* DescriptionKind(PJRT_DeviceDescription_Kind_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_DeviceDescription_Kind");
  args->device_kind = args->device_description->kind.data();
  args->device_kind_size = args->device_description->kind.size();
  return nullptr;
}

PJRT_Error* DescriptionDebugString(PJRT_DeviceDescription_DebugString_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_DeviceDescription_DebugString");
  args->debug_string = args->device_description->debug_string.data();
  args->debug_string_size = args->device_description->debug_string.size();
  return nullptr;
}

PJRT_Error* DescriptionToString(PJRT_DeviceDescription_ToString_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_DeviceDescription_ToString");
  args->to_string = args->device_description->to_string.data();
  args->to_string_size = args->device_description->to_string.size();
  return nullptr;
}

// ---- Device

PJRT_Error* DeviceGetDescription(PJRT_Device_GetDescription_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Device_GetDescription");
  args->device_description = &args->device->description;
  return nullptr;
}

PJRT_Error* DeviceIsAddressable(PJRT_Device_IsAddressable_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Device_IsAddressable");
  args->is_addressable = true;
  return nullptr;
}

PJRT_Error* DeviceLocalHardwareId(PJRT_Device_LocalHardwareId_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Device_LocalHardwareId");
  args->local_hardware_id = args->device->local_hardware_id;
  return nullptr;
}

PJRT_Error* DeviceAddressableMemories(PJRT_Device_AddressableMemories_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Device_AddressableMemories");
  args->memories = args->device->memories.data();
  args->num_memories = args->device->memories.size();
  return nullptr;
}

PJRT_Error* DeviceDefaultMemory(PJRT_Device_DefaultMemory_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Device_DefaultMemory");
  args->memory = args->device->memory;
  return nullptr;
}

// The device's HBM: the limit is the chip's (per device); in use and peak
// are the emulated device's accounting (no buffers live there yet).
PJRT_Error* DeviceMemoryStats(PJRT_Device_MemoryStats_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Device_MemoryStats");
  const PJRT_Device& device = *args->device;
  const auto& mesh_device = device.client->mesh->device(device.description.id);
  args->bytes_in_use = mesh_device.hbm_in_use();
  args->peak_bytes_in_use = mesh_device.hbm_peak();
  args->peak_bytes_in_use_is_set = true;
  args->bytes_limit = device.hbm_bytes;
  args->bytes_limit_is_set = true;
  args->num_allocs_is_set = false;
  args->largest_alloc_size_is_set = false;
  args->bytes_reserved_is_set = false;
  args->peak_bytes_reserved_is_set = false;
  args->bytes_reservable_limit_is_set = false;
  args->largest_free_block_bytes_is_set = false;
  args->pool_bytes_is_set = false;
  args->peak_pool_bytes_is_set = false;
  return nullptr;
}

// ---- Memory

PJRT_Error* MemoryId(PJRT_Memory_Id_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Memory_Id");
  args->id = args->memory->id;
  return nullptr;
}

PJRT_Error* MemoryKind(PJRT_Memory_Kind_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Memory_Kind");
  args->kind = args->memory->kind.data();
  args->kind_size = args->memory->kind.size();
  return nullptr;
}

PJRT_Error* MemoryKindId(PJRT_Memory_Kind_Id_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Memory_Kind_Id");
  args->kind_id = 0;  // one kind of memory: the device's HBM
  return nullptr;
}

PJRT_Error* MemoryDebugString(PJRT_Memory_DebugString_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Memory_DebugString");
  args->debug_string = args->memory->debug_string.data();
  args->debug_string_size = args->memory->debug_string.size();
  return nullptr;
}

PJRT_Error* MemoryToString(PJRT_Memory_ToString_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Memory_ToString");
  args->to_string = args->memory->to_string.data();
  args->to_string_size = args->memory->to_string.size();
  return nullptr;
}

PJRT_Error* MemoryAddressableByDevices(PJRT_Memory_AddressableByDevices_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Memory_AddressableByDevices");
  args->devices = args->memory->devices.data();
  args->num_devices = args->memory->devices.size();
  return nullptr;
}

// A slot's stub: UNIMPLEMENTED naming the function. The two functions that
// return nothing get none (both are implemented).
template <typename Args>
typename PjrtSlotType<Args>::Fn* StubFor(PJRT_Error* (*stub)(Args*)) {
  if constexpr (std::is_same_v<typename PjrtSlotType<Args>::Fn, PJRT_Error*(Args*)>) {
    return stub;
  } else {
    return nullptr;
  }
}

PJRT_Api MakeApi() {
  PJRT_Api api{};
  api.struct_size = sizeof(PJRT_Api);
  // The chain: Shardings, then the profiler (each framework skips types it does not know).
  api.extension_start = ShardingsExtension();
  api.extension_start->next = ProfilerExtension();
  api.pjrt_api_version.struct_size = sizeof(PJRT_Api_Version);
  api.pjrt_api_version.major_version = kPjrtApiMajor;
  api.pjrt_api_version.minor_version = kPjrtApiMinor;
#define TPUMESH_PJRT_STUB(name)                                                                   \
  api.PJRT_##name = StubFor<PJRT_##name##_Args>(                                                  \
      +[](PJRT_##name##_Args*) -> PJRT_Error* { return NotImplemented("PJRT_" #name); });
  TPUMESH_PJRT_SLOTS(TPUMESH_PJRT_STUB)
#undef TPUMESH_PJRT_STUB
  api.PJRT_Error_Destroy = ErrorDestroy;
  api.PJRT_Error_Message = ErrorMessage;
  api.PJRT_Error_GetCode = ErrorGetCode;
  api.PJRT_Plugin_Initialize = PluginInitialize;
  api.PJRT_Plugin_Attributes = PluginAttributes;
  api.PJRT_Client_Create = ClientCreate;
  api.PJRT_Client_Destroy = ClientDestroy;
  api.PJRT_Client_PlatformName = ClientPlatformName;
  api.PJRT_Client_ProcessIndex = ClientProcessIndex;
  api.PJRT_Client_PlatformVersion = ClientPlatformVersion;
  api.PJRT_Client_Devices = ClientDevices;
  api.PJRT_Client_AddressableDevices = ClientAddressableDevices;
  api.PJRT_Client_LookupDevice = ClientLookupDevice;
  api.PJRT_Client_LookupAddressableDevice = ClientLookupAddressableDevice;
  api.PJRT_Client_AddressableMemories = ClientAddressableMemories;
  api.PJRT_DeviceDescription_Id = DescriptionId;
  api.PJRT_DeviceDescription_ProcessIndex = DescriptionProcessIndex;
  api.PJRT_DeviceDescription_Attributes = DescriptionAttributes;
  api.PJRT_DeviceDescription_Kind = DescriptionKind;
  api.PJRT_DeviceDescription_DebugString = DescriptionDebugString;
  api.PJRT_DeviceDescription_ToString = DescriptionToString;
  api.PJRT_Device_GetDescription = DeviceGetDescription;
  api.PJRT_Device_IsAddressable = DeviceIsAddressable;
  api.PJRT_Device_LocalHardwareId = DeviceLocalHardwareId;
  api.PJRT_Device_AddressableMemories = DeviceAddressableMemories;
  api.PJRT_Device_DefaultMemory = DeviceDefaultMemory;
  api.PJRT_Device_MemoryStats = DeviceMemoryStats;
  api.PJRT_Memory_Id = MemoryId;
  api.PJRT_Memory_Kind = MemoryKind;
  api.PJRT_Memory_Kind_Id = MemoryKindId;
  api.PJRT_Memory_DebugString = MemoryDebugString;
  api.PJRT_Memory_ToString = MemoryToString;
  api.PJRT_Memory_AddressableByDevices = MemoryAddressableByDevices;
  FillBufferSlots(api);
  FillExecutableSlots(api);
  return api;
}

}  // namespace
}  // namespace tpumesh::pjrt

extern "C" __attribute__((visibility("default"))) const PJRT_Api* GetPjrtApi() {
  static const PJRT_Api api = tpumesh::pjrt::MakeApi();
  return &api;
}
