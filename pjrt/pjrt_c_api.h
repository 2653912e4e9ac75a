// pjrt_c_api.h: the PJRT C API ABI, as far as tpumesh implements it.
//
// PJRT is JAX's device interface: a plugin is a shared library exporting
// `const PJRT_Api* GetPjrtApi()`, a table of function pointers each taking
// one argument struct. This header is written from the documented layout of
// XLA's xla/pjrt/c/pjrt_c_api.h at API version 0.91 (PJRT_API_MAJOR 0,
// PJRT_API_MINOR 91); it is not that file. It declares:
//   - PJRT_Api itself, every slot of 0.91 in order (kPjrtApiSlotCount, each a
//     function pointer; TPUMESH_PJRT_SLOTS lists them). A slot whose argument
//     struct is not declared here still exists, typed with an incomplete
//     struct: pjrt/ fills it with a function returning an UNIMPLEMENTED
//     PJRT_Error "tpumesh: PJRT_<name> is not implemented".
//   - the argument structs of the functions pjrt/ implements, field for field.
// Contract: every struct here has the size 0.91 gives it (static_asserts
// below, for x86-64/aarch64 LP64). The framework passes `struct_size` in
// each argument struct; a caller built against an older minor passes a
// smaller one, and pjrt/ reads no field beyond it.
//
// Compatibility (measured with jaxlib 0.10.2, docs/pjrt.md): the framework
// is 0.112; it requires major == 0 and accepts a plugin minor >= 0.29
// (ENABLE_PJRT_COMPATIBILITY, on by default), calling a newer function only
// when the plugin's minor says it has it. It reads the Shardings extension
// (an executable's parameter and output shardings) only from a plugin of
// minor 91 or more: hence 0.91 (measured in its disassembly:
// PjRtCApiExecutable::GetOutputShardings compares the minor with 90).
#ifndef TPUMESH_PJRT_PJRT_C_API_H_
#define TPUMESH_PJRT_PJRT_C_API_H_

#include <cstddef>
#include <cstdint>

extern "C" {

inline constexpr int kPjrtApiMajor = 0;
inline constexpr int kPjrtApiMinor = 91;

// Extensions: a chain from PJRT_Api::extension_start. tpumesh offers
// Shardings (type 19): the executables' parameter and output shardings as
// serialized xla.OpSharding protos (jaxlib 0.10 reads it; older ones skip
// types they do not know); then the profiler (type 1, pjrt/profiler_c_api.h).
enum PJRT_Extension_Type { PJRT_Extension_Type_Shardings = 19 };
struct PJRT_Extension_Base {
  size_t struct_size;
  PJRT_Extension_Type type;
  PJRT_Extension_Base* next;
};
struct PJRT_Error;           // pjrt/c_boundary.h
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_DeviceDescription;
struct PJRT_Memory;

struct PJRT_Api_Version {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  int major_version;
  int minor_version;
};

// absl::StatusCode's numbering.
enum PJRT_Error_Code {
  PJRT_Error_Code_OK = 0,
  PJRT_Error_Code_CANCELLED = 1,
  PJRT_Error_Code_UNKNOWN = 2,
  PJRT_Error_Code_INVALID_ARGUMENT = 3,
  PJRT_Error_Code_DEADLINE_EXCEEDED = 4,
  PJRT_Error_Code_NOT_FOUND = 5,
  PJRT_Error_Code_ALREADY_EXISTS = 6,
  PJRT_Error_Code_PERMISSION_DENIED = 7,
  PJRT_Error_Code_RESOURCE_EXHAUSTED = 8,
  PJRT_Error_Code_FAILED_PRECONDITION = 9,
  PJRT_Error_Code_ABORTED = 10,
  PJRT_Error_Code_OUT_OF_RANGE = 11,
  PJRT_Error_Code_UNIMPLEMENTED = 12,
  PJRT_Error_Code_INTERNAL = 13,
  PJRT_Error_Code_UNAVAILABLE = 14,
  PJRT_Error_Code_DATA_LOSS = 15,
  PJRT_Error_Code_UNAUTHENTICATED = 16,
};

enum PJRT_NamedValue_Type {
  PJRT_NamedValue_kString = 0,
  PJRT_NamedValue_kInt64 = 1,
  PJRT_NamedValue_kInt64List = 2,
  PJRT_NamedValue_kFloat = 3,
  PJRT_NamedValue_kBool = 4,
};

struct PJRT_NamedValue {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* name;
  size_t name_size;
  PJRT_NamedValue_Type type;
  union {
    const char* string_value;
    int64_t int64_value;
    const int64_t* int64_array_value;
    float float_value;
    bool bool_value;
  };
  size_t value_size;  // elements of a list or string; 1 for a scalar
};

// Every argument struct opens with these two fields.
#define TPUMESH_PJRT_ARGS_HEAD \
  size_t struct_size;          \
  PJRT_Extension_Base* extension_start

// ---- Errors
struct PJRT_Error_Destroy_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Error* error; };
struct PJRT_Error_Message_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  const PJRT_Error* error;
  const char* message;  // out: lives as long as `error`
  size_t message_size;  // out
};
struct PJRT_Error_GetCode_Args { TPUMESH_PJRT_ARGS_HEAD; const PJRT_Error* error; PJRT_Error_Code code; };

// ---- Plugin
struct PJRT_Plugin_Initialize_Args { TPUMESH_PJRT_ARGS_HEAD; };
struct PJRT_Plugin_Attributes_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  const PJRT_NamedValue* attributes;  // out: live for the process
  size_t num_attributes;              // out
};

// ---- Client
struct PJRT_Client_Create_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  const PJRT_NamedValue* create_options;
  size_t num_options;
  void* kv_get_callback;  // key-value store callbacks: multi-process only, unused
  void* kv_get_user_arg;
  void* kv_put_callback;
  void* kv_put_user_arg;
  PJRT_Client* client;  // out
  void* kv_try_get_callback;
  void* kv_try_get_user_arg;
};
struct PJRT_Client_Destroy_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Client* client; };
struct PJRT_Client_PlatformName_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Client* client;
  const char* platform_name;  // out: owned by the client
  size_t platform_name_size;  // out
};
struct PJRT_Client_ProcessIndex_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Client* client; int process_index; };
struct PJRT_Client_PlatformVersion_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Client* client;
  const char* platform_version;  // out: owned by the client
  size_t platform_version_size;  // out
};
struct PJRT_Client_Devices_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Client* client;
  PJRT_Device* const* devices;  // out
  size_t num_devices;           // out
};
struct PJRT_Client_AddressableDevices_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Client* client;
  PJRT_Device* const* addressable_devices;  // out
  size_t num_addressable_devices;           // out
};
struct PJRT_Client_LookupDevice_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Client* client; int id; PJRT_Device* device; };
struct PJRT_Client_LookupAddressableDevice_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Client* client;
  int local_hardware_id;
  PJRT_Device* addressable_device;  // out
};
struct PJRT_Client_AddressableMemories_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Client* client;
  PJRT_Memory* const* addressable_memories;  // out
  size_t num_addressable_memories;           // out
};

// ---- DeviceDescription (strings and arrays out: owned by the description)
struct PJRT_DeviceDescription_Id_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_DeviceDescription* device_description; int id; };
struct PJRT_DeviceDescription_ProcessIndex_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_DeviceDescription* device_description;
  int process_index;  // out
};
struct PJRT_DeviceDescription_Attributes_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_DeviceDescription* device_description;
  size_t num_attributes;              // out
  const PJRT_NamedValue* attributes;  // out
};
#define TPUMESH_PJRT_STRING_ARGS(name, owner_type, owner, out)                  \
  struct name {                                                                 \
    TPUMESH_PJRT_ARGS_HEAD;                                                     \
    owner_type* owner;                                                          \
    const char* out;                                                            \
    size_t out##_size;                                                          \
  }
TPUMESH_PJRT_STRING_ARGS(PJRT_DeviceDescription_Kind_Args, PJRT_DeviceDescription, device_description, device_kind);
TPUMESH_PJRT_STRING_ARGS(PJRT_DeviceDescription_DebugString_Args, PJRT_DeviceDescription, device_description,
                         debug_string);
TPUMESH_PJRT_STRING_ARGS(PJRT_DeviceDescription_ToString_Args, PJRT_DeviceDescription, device_description,
                         to_string);

// ---- Device
struct PJRT_Device_GetDescription_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Device* device;
  PJRT_DeviceDescription* device_description;  // out
};
struct PJRT_Device_IsAddressable_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Device* device; bool is_addressable; };
struct PJRT_Device_LocalHardwareId_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Device* device; int local_hardware_id; };
struct PJRT_Device_AddressableMemories_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Device* device;
  PJRT_Memory* const* memories;  // out
  size_t num_memories;           // out
};
struct PJRT_Device_DefaultMemory_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Device* device; PJRT_Memory* memory; };
// Each optional figure comes with its *_is_set flag (bytes_in_use has none).
struct PJRT_Device_MemoryStats_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Device* device;
  int64_t bytes_in_use;
  int64_t peak_bytes_in_use;
  bool peak_bytes_in_use_is_set;
  int64_t num_allocs;
  bool num_allocs_is_set;
  int64_t largest_alloc_size;
  bool largest_alloc_size_is_set;
  int64_t bytes_limit;
  bool bytes_limit_is_set;
  int64_t bytes_reserved;
  bool bytes_reserved_is_set;
  int64_t peak_bytes_reserved;
  bool peak_bytes_reserved_is_set;
  int64_t bytes_reservable_limit;
  bool bytes_reservable_limit_is_set;
  int64_t largest_free_block_bytes;
  bool largest_free_block_bytes_is_set;
  int64_t pool_bytes;
  bool pool_bytes_is_set;
  int64_t peak_pool_bytes;
  bool peak_pool_bytes_is_set;
};

// ---- Memory
struct PJRT_Memory_Id_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Memory* memory; int id; };
TPUMESH_PJRT_STRING_ARGS(PJRT_Memory_Kind_Args, PJRT_Memory, memory, kind);
struct PJRT_Memory_Kind_Id_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Memory* memory; int kind_id; };
TPUMESH_PJRT_STRING_ARGS(PJRT_Memory_DebugString_Args, PJRT_Memory, memory, debug_string);
TPUMESH_PJRT_STRING_ARGS(PJRT_Memory_ToString_Args, PJRT_Memory, memory, to_string);
#undef TPUMESH_PJRT_STRING_ARGS
struct PJRT_Memory_AddressableByDevices_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Memory* memory;
  PJRT_Device* const* devices;  // out
  size_t num_devices;           // out
};

// ---- Events (tpumesh's are always ready: work is done when the call returns)
struct PJRT_Event;
typedef void (*PJRT_Event_OnReadyCallback)(PJRT_Error* error, void* user_arg);
struct PJRT_Event_Destroy_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Event* event; };
struct PJRT_Event_IsReady_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Event* event; bool is_ready; };
struct PJRT_Event_Error_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Event* event; };
struct PJRT_Event_Await_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Event* event; };
struct PJRT_Event_OnReady_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Event* event;
  PJRT_Event_OnReadyCallback callback;  // called with the event's error (owned by the callback) and user_arg
  void* user_arg;
};

// ---- Buffers
struct PJRT_Buffer;

// Element types, numbered as the API numbers them (the first 16 of 0.90's).
enum PJRT_Buffer_Type {
  PJRT_Buffer_Type_INVALID = 0,
  PJRT_Buffer_Type_PRED = 1,
  PJRT_Buffer_Type_S8 = 2,
  PJRT_Buffer_Type_S16 = 3,
  PJRT_Buffer_Type_S32 = 4,
  PJRT_Buffer_Type_S64 = 5,
  PJRT_Buffer_Type_U8 = 6,
  PJRT_Buffer_Type_U16 = 7,
  PJRT_Buffer_Type_U32 = 8,
  PJRT_Buffer_Type_U64 = 9,
  PJRT_Buffer_Type_F16 = 10,
  PJRT_Buffer_Type_F32 = 11,
  PJRT_Buffer_Type_F64 = 12,
  PJRT_Buffer_Type_BF16 = 13,
  PJRT_Buffer_Type_C64 = 14,
  PJRT_Buffer_Type_C128 = 15,
};

enum PJRT_HostBufferSemantics {
  PJRT_HostBufferSemantics_kImmutableOnlyDuringCall = 0,
  PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes = 1,
  PJRT_HostBufferSemantics_kImmutableZeroCopy = 2,
  PJRT_HostBufferSemantics_kMutableZeroCopy = 3,
};

enum PJRT_Buffer_MemoryLayout_Type {
  PJRT_Buffer_MemoryLayout_Type_Tiled = 0,
  PJRT_Buffer_MemoryLayout_Type_Strides = 1,
};
struct PJRT_Buffer_MemoryLayout_Tiled {
  TPUMESH_PJRT_ARGS_HEAD;
  const int64_t* minor_to_major;
  size_t minor_to_major_size;
  const int64_t* tile_dims;      // the tiles' dimensions, concatenated
  const size_t* tile_dim_sizes;  // each tile's rank
  size_t num_tiles;
};
struct PJRT_Buffer_MemoryLayout_Strides {
  TPUMESH_PJRT_ARGS_HEAD;
  const int64_t* byte_strides;
  size_t num_byte_strides;
};
struct PJRT_Buffer_MemoryLayout {
  TPUMESH_PJRT_ARGS_HEAD;
  union {
    PJRT_Buffer_MemoryLayout_Tiled tiled;
    PJRT_Buffer_MemoryLayout_Strides strides;
  };
  PJRT_Buffer_MemoryLayout_Type type;
};

struct PJRT_Client_BufferFromHostBuffer_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Client* client;
  const void* data;
  PJRT_Buffer_Type type;
  const int64_t* dims;
  size_t num_dims;
  const int64_t* byte_strides;  // null: dense row-major
  size_t num_byte_strides;
  PJRT_HostBufferSemantics host_buffer_semantics;
  PJRT_Device* device;  // either this
  PJRT_Memory* memory;  // or this
  PJRT_Buffer_MemoryLayout* device_layout;  // null: the default
  PJRT_Event* done_with_host_buffer;        // out
  PJRT_Buffer* buffer;                      // out
};
struct PJRT_Buffer_Destroy_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Buffer* buffer; };
struct PJRT_Buffer_ElementType_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Buffer* buffer; PJRT_Buffer_Type type; };
struct PJRT_Buffer_Dimensions_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Buffer* buffer;
  const int64_t* dims;  // out: owned by the buffer
  size_t num_dims;      // out
};
struct PJRT_Buffer_UnpaddedDimensions_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Buffer* buffer;
  const int64_t* unpadded_dims;  // out
  size_t num_dims;               // out
};
struct PJRT_Buffer_DynamicDimensionIndices_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Buffer* buffer;
  const size_t* dynamic_dim_indices;  // out
  size_t num_dynamic_dims;            // out
};
struct PJRT_Buffer_GetMemoryLayout_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Buffer* buffer;
  PJRT_Buffer_MemoryLayout layout;  // out: its arrays owned by the buffer
};
struct PJRT_Buffer_OnDeviceSizeInBytes_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Buffer* buffer;
  size_t on_device_size_in_bytes;  // out
};
struct PJRT_Buffer_Device_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Buffer* buffer; PJRT_Device* device; };
struct PJRT_Buffer_Memory_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Buffer* buffer; PJRT_Memory* memory; };
struct PJRT_Buffer_Delete_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Buffer* buffer; };
struct PJRT_Buffer_IsDeleted_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Buffer* buffer; bool is_deleted; };
struct PJRT_Buffer_ToHostBuffer_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Buffer* src;
  PJRT_Buffer_MemoryLayout* host_layout;  // null: dense row-major
  void* dst;        // null: only dst_size is answered
  size_t dst_size;  // in: dst's bytes; out (dst null): the bytes needed
  PJRT_Event* event;  // out
};
struct PJRT_Buffer_IsOnCpu_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Buffer* buffer; bool is_on_cpu; };
struct PJRT_Buffer_ReadyEvent_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Buffer* buffer; PJRT_Event* event; };
struct PJRT_Buffer_UnsafePointer_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Buffer* buffer; uintptr_t buffer_pointer; };
struct PJRT_Buffer_CopyToDevice_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Buffer* buffer;
  PJRT_Device* dst_device;
  PJRT_Buffer* dst_buffer;  // out
};
struct PJRT_Buffer_CopyToMemory_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Buffer* buffer;
  PJRT_Memory* dst_memory;
  PJRT_Buffer* dst_buffer;  // out
};

// ---- Programs and executables (pjrt/executable.h)

struct PJRT_Executable;
struct PJRT_LoadedExecutable;
struct PJRT_ExecuteContext;

struct PJRT_Program {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  char* code;  // "mlir": MLIR bytecode (a StableHLO portable artifact) or text
  size_t code_size;
  const char* format;
  size_t format_size;
};
struct PJRT_Client_Compile_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Client* client;
  const PJRT_Program* program;
  const char* compile_options;  // a serialized xla.CompileOptionsProto
  size_t compile_options_size;
  PJRT_LoadedExecutable* executable;  // out
};
struct PJRT_Executable_Destroy_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Executable* executable; };
struct PJRT_LoadedExecutable_Destroy_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_LoadedExecutable* executable; };
struct PJRT_LoadedExecutable_GetExecutable_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_LoadedExecutable* loaded_executable;
  PJRT_Executable* executable;  // out; the caller destroys it
};
struct PJRT_Executable_Name_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Executable* executable;
  const char* executable_name;  // out
  size_t executable_name_size;  // out
};
struct PJRT_Executable_NumReplicas_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Executable* executable; size_t num_replicas; };
struct PJRT_Executable_NumPartitions_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Executable* executable; size_t num_partitions; };
struct PJRT_LoadedExecutable_AddressableDevices_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_LoadedExecutable* executable;
  PJRT_Device* const* addressable_devices;  // out
  size_t num_addressable_devices;           // out
};
struct PJRT_LoadedExecutable_Delete_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_LoadedExecutable* executable; };
struct PJRT_LoadedExecutable_IsDeleted_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_LoadedExecutable* executable;
  bool is_deleted;  // out
};
// Read: nothing beyond the head (no send/recv callbacks, nothing to keep
// from donation: tpumesh copies inputs).
struct PJRT_ExecuteOptions {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  void** send_callbacks;
  void** recv_callbacks;
  size_t num_send_ops;
  size_t num_recv_ops;
  int launch_id;
  const int64_t* non_donatable_input_indices;
  size_t num_non_donatable_input_indices;
  PJRT_ExecuteContext* context;
};
struct PJRT_LoadedExecutable_Execute_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_LoadedExecutable* executable;
  PJRT_ExecuteOptions* options;
  PJRT_Buffer* const* const* argument_lists;  // [num_devices][num_args]
  size_t num_devices;
  size_t num_args;
  PJRT_Buffer** const* output_lists;     // [num_devices][num_outputs], filled
  PJRT_Event** device_complete_events;   // [num_devices] or null, filled
  PJRT_Device* execute_device;           // null: the compiled devices
};
struct PJRT_DeviceAssignmentSerialized;
struct PJRT_LoadedExecutable_GetDeviceAssignment_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_LoadedExecutable* executable;
  const char* serialized_bytes;  // out: a serialized xla.DeviceAssignmentProto
  size_t serialized_bytes_size;  // out
  PJRT_DeviceAssignmentSerialized* serialized_device_assignment;                        // out: backs the bytes
  void (*serialized_device_assignment_deleter)(PJRT_DeviceAssignmentSerialized* da);  // out
};
struct PJRT_Shardings_PJRT_Executable_ParameterShardings_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Executable* executable;
  size_t num_parameters;                 // out
  const char* const* shardings;          // out: serialized xla.OpSharding each
  const size_t* sharding_sizes;          // out
};
struct PJRT_Shardings_PJRT_Executable_OutputShardings_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Executable* executable;
  size_t num_outputs;                    // out
  const char* const* shardings;          // out: serialized xla.OpSharding each
  const size_t* sharding_sizes;          // out
};
struct PJRT_Shardings_Extension {
  PJRT_Extension_Base base;
  PJRT_Error* (*PJRT_Shardings_PJRT_Executable_ParameterShardings)(
      PJRT_Shardings_PJRT_Executable_ParameterShardings_Args* args);
  PJRT_Error* (*PJRT_Shardings_PJRT_Executable_OutputShardings)(
      PJRT_Shardings_PJRT_Executable_OutputShardings_Args* args);
};
// Outs written only as far as the caller's struct_size reaches (the fields
// after temp_size_in_bytes came in later minors).
struct PJRT_Executable_GetCompiledMemoryStats_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Executable* executable;
  int64_t generated_code_size_in_bytes;  // out
  int64_t argument_size_in_bytes;        // out
  int64_t output_size_in_bytes;          // out
  int64_t alias_size_in_bytes;           // out
  int64_t temp_size_in_bytes;            // out
  int64_t host_generated_code_size_in_bytes;  // out
  int64_t host_argument_size_in_bytes;        // out
  int64_t host_output_size_in_bytes;          // out
  int64_t host_alias_size_in_bytes;           // out
  int64_t host_temp_size_in_bytes;            // out
  int64_t peak_memory_in_bytes;               // out
};
struct PJRT_Executable_NumOutputs_Args { TPUMESH_PJRT_ARGS_HEAD; PJRT_Executable* executable; size_t num_outputs; };
struct PJRT_Executable_SizeOfGeneratedCodeInBytes_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Executable* executable;
  int64_t size_in_bytes;  // out
};
struct PJRT_Executable_Fingerprint_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Executable* executable;
  const char* executable_fingerprint;  // out
  size_t executable_fingerprint_size;  // out
};
struct PJRT_LoadedExecutable_Fingerprint_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_LoadedExecutable* executable;
  const char* executable_fingerprint;  // out
  size_t executable_fingerprint_size;  // out
};
struct PJRT_Executable_GetCostAnalysis_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Executable* executable;
  size_t num_properties;              // out
  const PJRT_NamedValue* properties;  // out; lives as long as the executable
};
struct PJRT_Executable_OutputElementTypes_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Executable* executable;
  PJRT_Buffer_Type* output_types;  // out
  size_t num_output_types;         // out
};
struct PJRT_Executable_OutputDimensions_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Executable* executable;
  size_t num_outputs;        // out
  const int64_t* dims;       // out: every output's dims, concatenated
  const size_t* dim_sizes;   // out: each output's rank
};
struct PJRT_Executable_OutputMemoryKinds_Args {
  TPUMESH_PJRT_ARGS_HEAD;
  PJRT_Executable* executable;
  size_t num_outputs;               // out
  const char* const* memory_kinds;  // out
  const size_t* memory_kind_sizes;  // out
};

// The slots of PJRT_Api 0.91, in order (0.91 appended Device_GetAttributes), without their "PJRT_" prefix.
// X(name) for each; slot PJRT_<name> takes a PJRT_<name>_Args*.
#define TPUMESH_PJRT_SLOTS(X) \
  X(Error_Destroy) \
  X(Error_Message) \
  X(Error_GetCode) \
  X(Plugin_Initialize) \
  X(Plugin_Attributes) \
  X(Event_Destroy) \
  X(Event_IsReady) \
  X(Event_Error) \
  X(Event_Await) \
  X(Event_OnReady) \
  X(Client_Create) \
  X(Client_Destroy) \
  X(Client_PlatformName) \
  X(Client_ProcessIndex) \
  X(Client_PlatformVersion) \
  X(Client_Devices) \
  X(Client_AddressableDevices) \
  X(Client_LookupDevice) \
  X(Client_LookupAddressableDevice) \
  X(Client_AddressableMemories) \
  X(Client_Compile) \
  X(Client_DefaultDeviceAssignment) \
  X(Client_BufferFromHostBuffer) \
  X(DeviceDescription_Id) \
  X(DeviceDescription_ProcessIndex) \
  X(DeviceDescription_Attributes) \
  X(DeviceDescription_Kind) \
  X(DeviceDescription_DebugString) \
  X(DeviceDescription_ToString) \
  X(Device_GetDescription) \
  X(Device_IsAddressable) \
  X(Device_LocalHardwareId) \
  X(Device_AddressableMemories) \
  X(Device_DefaultMemory) \
  X(Device_MemoryStats) \
  X(Memory_Id) \
  X(Memory_Kind) \
  X(Memory_DebugString) \
  X(Memory_ToString) \
  X(Memory_AddressableByDevices) \
  X(Executable_Destroy) \
  X(Executable_Name) \
  X(Executable_NumReplicas) \
  X(Executable_NumPartitions) \
  X(Executable_NumOutputs) \
  X(Executable_SizeOfGeneratedCodeInBytes) \
  X(Executable_GetCostAnalysis) \
  X(Executable_OutputMemoryKinds) \
  X(Executable_OptimizedProgram) \
  X(Executable_Serialize) \
  X(LoadedExecutable_Destroy) \
  X(LoadedExecutable_GetExecutable) \
  X(LoadedExecutable_AddressableDevices) \
  X(LoadedExecutable_Delete) \
  X(LoadedExecutable_IsDeleted) \
  X(LoadedExecutable_Execute) \
  X(Executable_DeserializeAndLoad) \
  X(LoadedExecutable_Fingerprint) \
  X(Buffer_Destroy) \
  X(Buffer_ElementType) \
  X(Buffer_Dimensions) \
  X(Buffer_UnpaddedDimensions) \
  X(Buffer_DynamicDimensionIndices) \
  X(Buffer_GetMemoryLayout) \
  X(Buffer_OnDeviceSizeInBytes) \
  X(Buffer_Device) \
  X(Buffer_Memory) \
  X(Buffer_Delete) \
  X(Buffer_IsDeleted) \
  X(Buffer_CopyToDevice) \
  X(Buffer_ToHostBuffer) \
  X(Buffer_IsOnCpu) \
  X(Buffer_ReadyEvent) \
  X(Buffer_UnsafePointer) \
  X(Buffer_IncreaseExternalReferenceCount) \
  X(Buffer_DecreaseExternalReferenceCount) \
  X(Buffer_OpaqueDeviceMemoryDataPointer) \
  X(CopyToDeviceStream_Destroy) \
  X(CopyToDeviceStream_AddChunk) \
  X(CopyToDeviceStream_TotalBytes) \
  X(CopyToDeviceStream_GranuleSize) \
  X(CopyToDeviceStream_CurrentBytes) \
  X(TopologyDescription_Create) \
  X(TopologyDescription_Destroy) \
  X(TopologyDescription_PlatformName) \
  X(TopologyDescription_PlatformVersion) \
  X(TopologyDescription_GetDeviceDescriptions) \
  X(TopologyDescription_Serialize) \
  X(TopologyDescription_Attributes) \
  X(Compile) \
  X(Executable_OutputElementTypes) \
  X(Executable_OutputDimensions) \
  X(Buffer_CopyToMemory) \
  X(Client_CreateViewOfDeviceBuffer) \
  X(Executable_Fingerprint) \
  X(Client_TopologyDescription) \
  X(Executable_GetCompiledMemoryStats) \
  X(Memory_Kind_Id) \
  X(ExecuteContext_Create) \
  X(ExecuteContext_Destroy) \
  X(Buffer_CopyRawToHost) \
  X(AsyncHostToDeviceTransferManager_Destroy) \
  X(AsyncHostToDeviceTransferManager_TransferData) \
  X(Client_CreateBuffersForAsyncHostToDevice) \
  X(AsyncHostToDeviceTransferManager_RetrieveBuffer) \
  X(AsyncHostToDeviceTransferManager_Device) \
  X(AsyncHostToDeviceTransferManager_BufferCount) \
  X(AsyncHostToDeviceTransferManager_BufferSize) \
  X(AsyncHostToDeviceTransferManager_SetBufferError) \
  X(AsyncHostToDeviceTransferManager_AddMetadata) \
  X(Client_DmaMap) \
  X(Client_DmaUnmap) \
  X(Client_CreateUninitializedBuffer) \
  X(Client_UpdateGlobalProcessInfo) \
  X(TopologyDescription_Deserialize) \
  X(Client_CreateAliasBuffer) \
  X(Client_FulfillAliasBuffer) \
  X(LoadedExecutable_GetDeviceAssignment) \
  X(Client_CreateErrorBuffer) \
  X(AsyncHostToDeviceTransferManager_TransferLiteral) \
  X(Buffer_CopyRawToHostFuture) \
  X(Device_PoisonExecution) \
  X(Device_CreateAsyncTrackingEvent) \
  X(AsyncTrackingEvent_Destroy) \
  X(Executable_GetCompileOptions) \
  X(Buffer_DonateWithControlDependency) \
  X(Event_Create) \
  X(Event_Set) \
  X(Device_GetAttributes)

inline constexpr int kPjrtApiSlotCount = 129;

}  // extern "C"

// Two functions return nothing; every other slot returns a PJRT_Error*
// (nullptr on success, else owned by the caller: PJRT_Error_Destroy).
#define TPUMESH_PJRT_DECLARE_SLOT(name) struct PJRT_##name##_Args;
TPUMESH_PJRT_SLOTS(TPUMESH_PJRT_DECLARE_SLOT)
#undef TPUMESH_PJRT_DECLARE_SLOT

template <typename Args>
struct PjrtSlotType {
  using Fn = PJRT_Error*(Args*);
};
template <>
struct PjrtSlotType<PJRT_Error_Destroy_Args> {
  using Fn = void(PJRT_Error_Destroy_Args*);
};
template <>
struct PjrtSlotType<PJRT_Error_Message_Args> {
  using Fn = void(PJRT_Error_Message_Args*);
};

struct PJRT_Api {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Api_Version pjrt_api_version;
#define TPUMESH_PJRT_API_FIELD(name) PjrtSlotType<PJRT_##name##_Args>::Fn* PJRT_##name;
  TPUMESH_PJRT_SLOTS(TPUMESH_PJRT_API_FIELD)
#undef TPUMESH_PJRT_API_FIELD
};

// The plugin's one export.
extern "C" const PJRT_Api* GetPjrtApi();

// Sizes at 0.91 (LP64): sizeof, then the API's STRUCT_SIZE below.
static_assert(sizeof(PJRT_Api) == 1072);
static_assert(sizeof(PJRT_Api) == 40 + 8 * kPjrtApiSlotCount);
static_assert(sizeof(PJRT_Api_Version) == 24);
static_assert(sizeof(PJRT_NamedValue) == 56);
static_assert(sizeof(PJRT_Error_Destroy_Args) == 24);
static_assert(sizeof(PJRT_Error_Message_Args) == 40);
static_assert(sizeof(PJRT_Error_GetCode_Args) == 32);
static_assert(sizeof(PJRT_Plugin_Initialize_Args) == 16);
static_assert(sizeof(PJRT_Plugin_Attributes_Args) == 32);
static_assert(sizeof(PJRT_Client_Create_Args) == 88);
static_assert(sizeof(PJRT_Client_Destroy_Args) == 24);
static_assert(sizeof(PJRT_Client_PlatformName_Args) == 40);
static_assert(sizeof(PJRT_Client_ProcessIndex_Args) == 32);
static_assert(sizeof(PJRT_Client_PlatformVersion_Args) == 40);
static_assert(sizeof(PJRT_Client_Devices_Args) == 40);
static_assert(sizeof(PJRT_Client_AddressableDevices_Args) == 40);
static_assert(sizeof(PJRT_Client_LookupDevice_Args) == 40);
static_assert(sizeof(PJRT_Client_LookupAddressableDevice_Args) == 40);
static_assert(sizeof(PJRT_Client_AddressableMemories_Args) == 40);
static_assert(sizeof(PJRT_DeviceDescription_Id_Args) == 32);
static_assert(sizeof(PJRT_DeviceDescription_ProcessIndex_Args) == 32);
static_assert(sizeof(PJRT_DeviceDescription_Attributes_Args) == 40);
static_assert(sizeof(PJRT_DeviceDescription_Kind_Args) == 40);
static_assert(sizeof(PJRT_DeviceDescription_DebugString_Args) == 40);
static_assert(sizeof(PJRT_DeviceDescription_ToString_Args) == 40);
static_assert(sizeof(PJRT_Device_GetDescription_Args) == 32);
static_assert(sizeof(PJRT_Device_IsAddressable_Args) == 32);
static_assert(sizeof(PJRT_Device_LocalHardwareId_Args) == 32);
static_assert(sizeof(PJRT_Device_AddressableMemories_Args) == 40);
static_assert(sizeof(PJRT_Device_DefaultMemory_Args) == 32);
static_assert(sizeof(PJRT_Device_MemoryStats_Args) == 192);
static_assert(sizeof(PJRT_Memory_Id_Args) == 32);
static_assert(sizeof(PJRT_Memory_Kind_Args) == 40);
static_assert(sizeof(PJRT_Memory_Kind_Id_Args) == 32);
static_assert(sizeof(PJRT_Memory_DebugString_Args) == 40);
static_assert(sizeof(PJRT_Memory_ToString_Args) == 40);
static_assert(sizeof(PJRT_Memory_AddressableByDevices_Args) == 40);
static_assert(sizeof(PJRT_Event_Destroy_Args) == 24);
static_assert(sizeof(PJRT_Event_IsReady_Args) == 32);
static_assert(sizeof(PJRT_Event_Error_Args) == 24);
static_assert(sizeof(PJRT_Event_Await_Args) == 24);
static_assert(sizeof(PJRT_Event_OnReady_Args) == 40);
static_assert(sizeof(PJRT_Buffer_MemoryLayout_Tiled) == 56);
static_assert(sizeof(PJRT_Buffer_MemoryLayout_Strides) == 32);
static_assert(sizeof(PJRT_Buffer_MemoryLayout) == 80);
static_assert(sizeof(PJRT_Client_BufferFromHostBuffer_Args) == 120);
static_assert(sizeof(PJRT_Buffer_Destroy_Args) == 24);
static_assert(sizeof(PJRT_Buffer_ElementType_Args) == 32);
static_assert(sizeof(PJRT_Buffer_Dimensions_Args) == 40);
static_assert(sizeof(PJRT_Buffer_UnpaddedDimensions_Args) == 40);
static_assert(sizeof(PJRT_Buffer_DynamicDimensionIndices_Args) == 40);
static_assert(sizeof(PJRT_Buffer_GetMemoryLayout_Args) == 104);
static_assert(sizeof(PJRT_Buffer_OnDeviceSizeInBytes_Args) == 32);
static_assert(sizeof(PJRT_Buffer_Device_Args) == 32);
static_assert(sizeof(PJRT_Buffer_Memory_Args) == 32);
static_assert(sizeof(PJRT_Buffer_Delete_Args) == 24);
static_assert(sizeof(PJRT_Buffer_IsDeleted_Args) == 32);
static_assert(sizeof(PJRT_Buffer_ToHostBuffer_Args) == 56);
static_assert(sizeof(PJRT_Buffer_IsOnCpu_Args) == 32);
static_assert(sizeof(PJRT_Buffer_ReadyEvent_Args) == 32);
static_assert(sizeof(PJRT_Buffer_UnsafePointer_Args) == 32);
static_assert(sizeof(PJRT_Buffer_CopyToDevice_Args) == 40);
static_assert(sizeof(PJRT_Buffer_CopyToMemory_Args) == 40);

// An argument struct's size as the API counts it (its STRUCT_SIZE): up to
// the end of its last field, without tail padding. A caller sets
// struct_size to this, not to sizeof: PJRT_Error_GetCode_Args is 28, not 32.
template <typename Args>
inline constexpr size_t kPjrtStructSize = 0;  // only the structs listed below
#define TPUMESH_PJRT_STRUCT_SIZE(type, last_field) \
  template <>                                      \
  inline constexpr size_t kPjrtStructSize<type> = offsetof(type, last_field) + sizeof(type::last_field);
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Api_Version, minor_version)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_NamedValue, value_size)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Error_Destroy_Args, error)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Error_Message_Args, message_size)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Error_GetCode_Args, code)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Plugin_Initialize_Args, extension_start)
// XLA's traits named `attributes` the last field until after jax 0.4.38
// (whose framework passes 24 bytes); num_attributes is in the struct all the same.
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Plugin_Attributes_Args, attributes)
// Up to `client`: the kv_try_get fields after it are not read, so the
// shorter struct of an older framework (jax 0.4.38: 72 bytes) is accepted.
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Client_Create_Args, client)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Client_Destroy_Args, client)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Client_PlatformName_Args, platform_name_size)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Client_ProcessIndex_Args, process_index)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Client_PlatformVersion_Args, platform_version_size)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Client_Devices_Args, num_devices)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Client_AddressableDevices_Args, num_addressable_devices)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Client_LookupDevice_Args, device)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Client_LookupAddressableDevice_Args, addressable_device)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Client_AddressableMemories_Args, num_addressable_memories)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_DeviceDescription_Id_Args, id)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_DeviceDescription_ProcessIndex_Args, process_index)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_DeviceDescription_Attributes_Args, attributes)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_DeviceDescription_Kind_Args, device_kind_size)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_DeviceDescription_DebugString_Args, debug_string_size)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_DeviceDescription_ToString_Args, to_string_size)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Device_GetDescription_Args, device_description)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Device_IsAddressable_Args, is_addressable)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Device_LocalHardwareId_Args, local_hardware_id)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Device_AddressableMemories_Args, num_memories)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Device_DefaultMemory_Args, memory)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Device_MemoryStats_Args, peak_pool_bytes_is_set)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Memory_Id_Args, id)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Memory_Kind_Args, kind_size)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Memory_Kind_Id_Args, kind_id)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Memory_DebugString_Args, debug_string_size)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Memory_ToString_Args, to_string_size)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Memory_AddressableByDevices_Args, num_devices)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Event_Destroy_Args, event)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Event_IsReady_Args, is_ready)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Event_Error_Args, event)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Event_Await_Args, event)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Event_OnReady_Args, user_arg)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_MemoryLayout_Tiled, num_tiles)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_MemoryLayout_Strides, num_byte_strides)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_MemoryLayout, type)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Client_BufferFromHostBuffer_Args, buffer)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_Destroy_Args, buffer)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_ElementType_Args, type)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_Dimensions_Args, num_dims)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_UnpaddedDimensions_Args, num_dims)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_DynamicDimensionIndices_Args, num_dynamic_dims)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_GetMemoryLayout_Args, layout)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_OnDeviceSizeInBytes_Args, on_device_size_in_bytes)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_Device_Args, device)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_Memory_Args, memory)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_Delete_Args, buffer)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_IsDeleted_Args, is_deleted)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_ToHostBuffer_Args, event)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_IsOnCpu_Args, is_on_cpu)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_ReadyEvent_Args, event)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_UnsafePointer_Args, buffer_pointer)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_CopyToDevice_Args, dst_buffer)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Buffer_CopyToMemory_Args, dst_buffer)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Program, format_size)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Client_Compile_Args, executable)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Executable_Destroy_Args, executable)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_Destroy_Args, executable)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_GetExecutable_Args, executable)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Executable_Name_Args, executable_name_size)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Executable_NumReplicas_Args, num_replicas)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Executable_NumPartitions_Args, num_partitions)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_AddressableDevices_Args, num_addressable_devices)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_Delete_Args, executable)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_IsDeleted_Args, is_deleted)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_ExecuteOptions, launch_id)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_Execute_Args, execute_device)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Executable_NumOutputs_Args, num_outputs)
// Up to temp_size_in_bytes: what every framework since the function came passes.
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Executable_GetCompiledMemoryStats_Args, temp_size_in_bytes)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Shardings_PJRT_Executable_ParameterShardings_Args, sharding_sizes)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Shardings_PJRT_Executable_OutputShardings_Args, sharding_sizes)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Shardings_Extension, PJRT_Shardings_PJRT_Executable_OutputShardings)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_GetDeviceAssignment_Args, serialized_device_assignment_deleter)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Executable_SizeOfGeneratedCodeInBytes_Args, size_in_bytes)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Executable_Fingerprint_Args, executable_fingerprint_size)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_LoadedExecutable_Fingerprint_Args, executable_fingerprint_size)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Executable_GetCostAnalysis_Args, properties)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Executable_OutputElementTypes_Args, num_output_types)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Executable_OutputDimensions_Args, dim_sizes)
TPUMESH_PJRT_STRUCT_SIZE(PJRT_Executable_OutputMemoryKinds_Args, memory_kind_sizes)
#undef TPUMESH_PJRT_STRUCT_SIZE
static_assert(kPjrtStructSize<PJRT_Error_GetCode_Args> == 28);
static_assert(kPjrtStructSize<PJRT_Device_MemoryStats_Args> == 185);
static_assert(kPjrtStructSize<PJRT_Client_BufferFromHostBuffer_Args> == 120);
static_assert(kPjrtStructSize<PJRT_Buffer_ToHostBuffer_Args> == 56);
static_assert(kPjrtStructSize<PJRT_Buffer_MemoryLayout> == 76);
static_assert(kPjrtStructSize<PJRT_Client_Compile_Args> == 56);
static_assert(kPjrtStructSize<PJRT_Shardings_Extension> == 40);
static_assert(kPjrtStructSize<PJRT_LoadedExecutable_Execute_Args> == 80);

#endif  // TPUMESH_PJRT_PJRT_C_API_H_
