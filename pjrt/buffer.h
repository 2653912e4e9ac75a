// Device buffers and events of the plugin (PJRT_Buffer, PJRT_Event).
//
// Contract: a buffer holds its array's bytes dense and row-major (the
// layout it reports: minor_to_major descending, no tiles) and counts them
// against its device's HBM (mesh/device.h: a buffer that does not fit is
// RESOURCE_EXHAUSTED naming the device and sizes, as on a TPU). Transfers
// finish before the call returns, so every event is ready when made and
// carries no error. Element types: the API's first 16 (PRED through C128);
// others are UNIMPLEMENTED naming the type.
#ifndef TPUMESH_PJRT_BUFFER_H_
#define TPUMESH_PJRT_BUFFER_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "mesh/device.h"
#include "pjrt/pjrt_c_api.h"

struct PJRT_Event {
  tpumesh::Status status;  // always ok: tpumesh's transfers end before the call returns
};

struct PJRT_Buffer {
  PJRT_Device* device = nullptr;
  PJRT_Buffer_Type type = PJRT_Buffer_Type_INVALID;
  std::vector<int64_t> dims;
  std::vector<int64_t> minor_to_major;  // dense row-major: rank-1 ... 0
  std::vector<char> bytes;              // dense row-major; empty once deleted
  tpumesh::mesh::HbmReservation hbm;
  bool deleted = false;
};

namespace tpumesh::pjrt {

// Bytes per element, 0 for a type this plugin does not hold.
int ElementBytes(PJRT_Buffer_Type type);

// A ready event (every transfer and execution ends before its call returns).
PJRT_Event* ReadyEvent();

// A new buffer on `device` of `size` bytes (zeros), counted against its HBM
// (`what` names it in the RESOURCE_EXHAUSTED of a device out of HBM).
StatusOr<std::unique_ptr<PJRT_Buffer>> NewBuffer(PJRT_Device* device, PJRT_Buffer_Type type,
                                                 std::vector<int64_t> dims, int64_t size, std::string_view what);

// Frees the buffer's bytes and HBM and marks it deleted (PJRT_Buffer_Delete,
// a donated argument after its execution); the handle stays until
// PJRT_Buffer_Destroy.
void DeleteBuffer(PJRT_Buffer& b);

// Sets the Client_BufferFromHostBuffer, Buffer_* and Event_* slots.
void FillBufferSlots(PJRT_Api& api);

}  // namespace tpumesh::pjrt

#endif  // TPUMESH_PJRT_BUFFER_H_
