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

#include "pjrt/pjrt_c_api.h"

namespace tpumesh::pjrt {

// Sets the Client_BufferFromHostBuffer, Buffer_* and Event_* slots.
void FillBufferSlots(PJRT_Api& api);

}  // namespace tpumesh::pjrt

#endif  // TPUMESH_PJRT_BUFFER_H_
