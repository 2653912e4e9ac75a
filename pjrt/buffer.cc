#include "pjrt/buffer.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "mesh/device.h"
#include "pjrt/c_boundary.h"
#include "pjrt/client.h"

namespace tpumesh::pjrt {

// Bytes per element, 0 for a type this plugin does not hold.
void DeleteBuffer(PJRT_Buffer& b) {
  b.deleted = true;
  std::vector<char>().swap(b.bytes);
  b.hbm.Release();
}

int ElementBytes(PJRT_Buffer_Type type) {
  switch (type) {
    case PJRT_Buffer_Type_PRED:
    case PJRT_Buffer_Type_S8:
    case PJRT_Buffer_Type_U8:
      return 1;
    case PJRT_Buffer_Type_S16:
    case PJRT_Buffer_Type_U16:
    case PJRT_Buffer_Type_F16:
    case PJRT_Buffer_Type_BF16:
      return 2;
    case PJRT_Buffer_Type_S32:
    case PJRT_Buffer_Type_U32:
    case PJRT_Buffer_Type_F32:
      return 4;
    case PJRT_Buffer_Type_S64:
    case PJRT_Buffer_Type_U64:
    case PJRT_Buffer_Type_F64:
    case PJRT_Buffer_Type_C64:
      return 8;
    case PJRT_Buffer_Type_C128:
      return 16;
    default:
      return 0;
  }
}

PJRT_Event* ReadyEvent() { return new PJRT_Event{}; }

namespace {

// Copies an array laid out with `byte_strides` (any signs) into dense
// row-major `dst`.
void GatherStrided(const char* src, std::span<const int64_t> dims, std::span<const int64_t> byte_strides,
                   int element_bytes, char* dst) {
  const size_t rank = dims.size();
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  std::vector<int64_t> index(rank, 0);
  for (int64_t n = 0; n < count; ++n) {
    int64_t offset = 0;
    for (size_t k = 0; k < rank; ++k) offset += index[k] * byte_strides[k];
    std::memcpy(dst + n * element_bytes, src + offset, element_bytes);
    for (size_t k = rank; k-- > 0;) {  // the odometer: last axis fastest
      if (++index[k] < dims[k]) break;
      index[k] = 0;
    }
  }
}

}  // namespace

StatusOr<std::unique_ptr<PJRT_Buffer>> NewBuffer(PJRT_Device* device, PJRT_Buffer_Type type,
                                                 std::vector<int64_t> dims, int64_t size, std::string_view what) {
  auto buffer = std::make_unique<PJRT_Buffer>();
  buffer->device = device;
  buffer->type = type;
  buffer->dims = std::move(dims);
  for (size_t k = buffer->dims.size(); k-- > 0;) buffer->minor_to_major.push_back(static_cast<int64_t>(k));
  mesh::Device& hbm_device = device->client->mesh->device(device->description.id);
  TPUMESH_ASSIGN_OR_RETURN(buffer->hbm, hbm_device.Reserve(size, what));
  buffer->bytes.resize(size);
  return buffer;
}

namespace {

PJRT_Error* BufferFromHostBuffer(PJRT_Client_BufferFromHostBuffer_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Client_BufferFromHostBuffer");
  PJRT_Device* device = args->device;
  if (device == nullptr && args->memory != nullptr && !args->memory->devices.empty())
    device = args->memory->devices[0];
  if (device == nullptr)
    return ToError(InvalidArgumentError("tpumesh: PJRT_Client_BufferFromHostBuffer: neither a device nor a memory"));
  const int element_bytes = ElementBytes(args->type);
  if (element_bytes == 0)
    return ToError(UnimplementedError("tpumesh: buffers of PJRT element type " +
                                      std::to_string(static_cast<int>(args->type)) + " are not implemented"));
  if (args->device_layout != nullptr)
    return ToError(UnimplementedError("tpumesh: PJRT_Client_BufferFromHostBuffer with a device layout is not "
                                      "implemented (buffers are dense row-major)"));
  std::vector<int64_t> dims(args->dims, args->dims + args->num_dims);
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) return ToError(InvalidArgumentError("tpumesh: a buffer dimension is negative"));
    if (d > 0 && count > (int64_t{1} << 56) / d)  // bytes fit an int64 at 16 per element
      return ToError(ResourceExhaustedError("tpumesh: a buffer of more than 2^56 elements"));
    count *= d;
  }
  auto made = NewBuffer(device, args->type, std::move(dims), count * element_bytes, "a buffer from the host");
  if (!made.ok()) return ToError(made.status());
  std::unique_ptr<PJRT_Buffer> buffer = std::move(made).value();
  const int64_t size = count * element_bytes;
  const char* src = static_cast<const char*>(args->data);
  bool dense = args->byte_strides == nullptr || args->num_byte_strides == 0;
  if (!dense) {
    if (args->num_byte_strides != args->num_dims)
      return ToError(InvalidArgumentError("tpumesh: PJRT_Client_BufferFromHostBuffer: " +
                                          std::to_string(args->num_byte_strides) + " byte strides for rank " +
                                          std::to_string(args->num_dims)));
    int64_t expected = element_bytes;
    dense = true;
    for (size_t k = args->num_dims; k-- > 0;) {
      if (buffer->dims[k] > 1 && args->byte_strides[k] != expected) dense = false;
      expected *= buffer->dims[k];
    }
  }
  if (size > 0) {
    if (dense) {
      std::memcpy(buffer->bytes.data(), src, size);
    } else {
      GatherStrided(src, buffer->dims, std::span<const int64_t>(args->byte_strides, args->num_byte_strides),
                    element_bytes, buffer->bytes.data());
    }
  }
  args->done_with_host_buffer = ReadyEvent();  // copied: the host buffer is free now
  args->buffer = buffer.release();
  return nullptr;
}

PJRT_Error* BufferDestroy(PJRT_Buffer_Destroy_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Buffer_Destroy");
  delete args->buffer;
  return nullptr;
}

PJRT_Error* BufferElementType(PJRT_Buffer_ElementType_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Buffer_ElementType");
  args->type = args->buffer->type;
  return nullptr;
}

PJRT_Error* BufferDimensions(PJRT_Buffer_Dimensions_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Buffer_Dimensions");
  args->dims = args->buffer->dims.data();
  args->num_dims = args->buffer->dims.size();
  return nullptr;
}

PJRT_Error* BufferUnpaddedDimensions(PJRT_Buffer_UnpaddedDimensions_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Buffer_UnpaddedDimensions");
  args->unpadded_dims = args->buffer->dims.data();
  args->num_dims = args->buffer->dims.size();
  return nullptr;
}

PJRT_Error* BufferDynamicDimensionIndices(PJRT_Buffer_DynamicDimensionIndices_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Buffer_DynamicDimensionIndices");
  args->dynamic_dim_indices = nullptr;  // static shapes only
  args->num_dynamic_dims = 0;
  return nullptr;
}

PJRT_Error* BufferGetMemoryLayout(PJRT_Buffer_GetMemoryLayout_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Buffer_GetMemoryLayout");
  PJRT_Buffer_MemoryLayout& layout = args->layout;
  layout.struct_size = kPjrtStructSize<PJRT_Buffer_MemoryLayout>;
  layout.extension_start = nullptr;
  layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
  layout.tiled.struct_size = kPjrtStructSize<PJRT_Buffer_MemoryLayout_Tiled>;
  layout.tiled.extension_start = nullptr;
  layout.tiled.minor_to_major = args->buffer->minor_to_major.data();
  layout.tiled.minor_to_major_size = args->buffer->minor_to_major.size();
  layout.tiled.tile_dims = nullptr;
  layout.tiled.tile_dim_sizes = nullptr;
  layout.tiled.num_tiles = 0;
  return nullptr;
}

PJRT_Error* BufferOnDeviceSizeInBytes(PJRT_Buffer_OnDeviceSizeInBytes_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Buffer_OnDeviceSizeInBytes");
  args->on_device_size_in_bytes = args->buffer->hbm.bytes();
  return nullptr;
}

PJRT_Error* BufferDevice(PJRT_Buffer_Device_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Buffer_Device");
  args->device = args->buffer->device;
  return nullptr;
}

PJRT_Error* BufferMemory(PJRT_Buffer_Memory_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Buffer_Memory");
  args->memory = args->buffer->device->memory;
  return nullptr;
}

PJRT_Error* BufferDelete(PJRT_Buffer_Delete_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Buffer_Delete");
  DeleteBuffer(*args->buffer);
  return nullptr;
}

PJRT_Error* BufferIsDeleted(PJRT_Buffer_IsDeleted_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Buffer_IsDeleted");
  args->is_deleted = args->buffer->deleted;
  return nullptr;
}

// A host layout JAX may ask for that is the buffer's own (dense row-major).
bool IsDenseRowMajor(const PJRT_Buffer_MemoryLayout* layout, const PJRT_Buffer& b) {
  if (layout == nullptr) return true;
  if (layout->type != PJRT_Buffer_MemoryLayout_Type_Tiled || layout->tiled.num_tiles != 0) return false;
  return std::vector<int64_t>(layout->tiled.minor_to_major,
                              layout->tiled.minor_to_major + layout->tiled.minor_to_major_size) == b.minor_to_major;
}

PJRT_Error* BufferToHostBuffer(PJRT_Buffer_ToHostBuffer_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Buffer_ToHostBuffer");
  const PJRT_Buffer& b = *args->src;
  if (b.deleted)
    return ToError(FailedPreconditionError("tpumesh: PJRT_Buffer_ToHostBuffer: the buffer was deleted"));
  if (!IsDenseRowMajor(args->host_layout, b))
    return ToError(UnimplementedError("tpumesh: PJRT_Buffer_ToHostBuffer into a host layout other than dense "
                                      "row-major is not implemented"));
  if (args->dst == nullptr) {
    args->dst_size = b.bytes.size();
    return nullptr;
  }
  if (args->dst_size < b.bytes.size())
    return ToError(InvalidArgumentError("tpumesh: PJRT_Buffer_ToHostBuffer: " + std::to_string(args->dst_size) +
                                        " bytes at the destination, the buffer has " +
                                        std::to_string(b.bytes.size())));
  if (!b.bytes.empty()) std::memcpy(args->dst, b.bytes.data(), b.bytes.size());
  args->event = ReadyEvent();
  return nullptr;
}

// device_put between devices: a copy on the destination, counted there.
PJRT_Error* CopyBuffer(const PJRT_Buffer* src, PJRT_Device* dst_device, PJRT_Buffer** dst, const char* function) {
  if (src->deleted) return ToError(FailedPreconditionError(std::string("tpumesh: ") + function + ": the buffer was deleted"));
  if (dst_device == nullptr) return ToError(InvalidArgumentError(std::string("tpumesh: ") + function + ": no destination"));
  auto made = NewBuffer(dst_device, src->type, src->dims, static_cast<int64_t>(src->bytes.size()), "a buffer copy");
  if (!made.ok()) return ToError(made.status());
  if (!src->bytes.empty()) std::memcpy((*made)->bytes.data(), src->bytes.data(), src->bytes.size());
  *dst = made->release();
  return nullptr;
}

PJRT_Error* BufferCopyToDevice(PJRT_Buffer_CopyToDevice_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Buffer_CopyToDevice");
  return CopyBuffer(args->buffer, args->dst_device, &args->dst_buffer, "PJRT_Buffer_CopyToDevice");
}

PJRT_Error* BufferCopyToMemory(PJRT_Buffer_CopyToMemory_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Buffer_CopyToMemory");
  PJRT_Device* device =
      args->dst_memory != nullptr && !args->dst_memory->devices.empty() ? args->dst_memory->devices[0] : nullptr;
  return CopyBuffer(args->buffer, device, &args->dst_buffer, "PJRT_Buffer_CopyToMemory");
}

PJRT_Error* BufferIsOnCpu(PJRT_Buffer_IsOnCpu_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Buffer_IsOnCpu");
  args->is_on_cpu = false;  // emulated device memory: no zero-copy views for the host
  return nullptr;
}

// The address of the buffer's bytes in this process (jax's
// unsafe_buffer_pointer(): an identity, e.g. for telling whether two arrays
// share a buffer); 0 for an empty or deleted buffer.
PJRT_Error* BufferUnsafePointer(PJRT_Buffer_UnsafePointer_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Buffer_UnsafePointer");
  if (args->buffer->deleted)
    return ToError(FailedPreconditionError("tpumesh: PJRT_Buffer_UnsafePointer: the buffer was deleted"));
  args->buffer_pointer = reinterpret_cast<uintptr_t>(args->buffer->bytes.data());
  return nullptr;
}

PJRT_Error* BufferReadyEvent(PJRT_Buffer_ReadyEvent_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Buffer_ReadyEvent");
  args->event = ReadyEvent();
  return nullptr;
}

PJRT_Error* EventDestroy(PJRT_Event_Destroy_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Event_Destroy");
  delete args->event;
  return nullptr;
}

PJRT_Error* EventIsReady(PJRT_Event_IsReady_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Event_IsReady");
  args->is_ready = true;
  return nullptr;
}

PJRT_Error* EventError(PJRT_Event_Error_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Event_Error");
  return ToError(args->event->status);
}

PJRT_Error* EventAwait(PJRT_Event_Await_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Event_Await");
  return ToError(args->event->status);
}

PJRT_Error* EventOnReady(PJRT_Event_OnReady_Args* args) {
  TPUMESH_PJRT_CHECK(args, "PJRT_Event_OnReady");
  args->callback(ToError(args->event->status), args->user_arg);  // ready: called now
  return nullptr;
}

}  // namespace

void FillBufferSlots(PJRT_Api& api) {
  api.PJRT_Client_BufferFromHostBuffer = BufferFromHostBuffer;
  api.PJRT_Buffer_Destroy = BufferDestroy;
  api.PJRT_Buffer_ElementType = BufferElementType;
  api.PJRT_Buffer_Dimensions = BufferDimensions;
  api.PJRT_Buffer_UnpaddedDimensions = BufferUnpaddedDimensions;
  api.PJRT_Buffer_DynamicDimensionIndices = BufferDynamicDimensionIndices;
  api.PJRT_Buffer_GetMemoryLayout = BufferGetMemoryLayout;
  api.PJRT_Buffer_OnDeviceSizeInBytes = BufferOnDeviceSizeInBytes;
  api.PJRT_Buffer_Device = BufferDevice;
  api.PJRT_Buffer_Memory = BufferMemory;
  api.PJRT_Buffer_Delete = BufferDelete;
  api.PJRT_Buffer_IsDeleted = BufferIsDeleted;
  api.PJRT_Buffer_ToHostBuffer = BufferToHostBuffer;
  api.PJRT_Buffer_IsOnCpu = BufferIsOnCpu;
  api.PJRT_Buffer_ReadyEvent = BufferReadyEvent;
  api.PJRT_Buffer_UnsafePointer = BufferUnsafePointer;
  api.PJRT_Buffer_CopyToDevice = BufferCopyToDevice;
  api.PJRT_Buffer_CopyToMemory = BufferCopyToMemory;
  api.PJRT_Event_Destroy = EventDestroy;
  api.PJRT_Event_IsReady = EventIsReady;
  api.PJRT_Event_Error = EventError;
  api.PJRT_Event_Await = EventAwait;
  api.PJRT_Event_OnReady = EventOnReady;
}

}  // namespace tpumesh::pjrt
