// Layering probe (tests/layering/CMakeLists.txt): a file of the mesh layer,
// compiled with tpumesh_mesh's usage requirements only, that reaches up
// into pjrt/ (the JAX plugin, above it). Its own layer's header resolves;
// the pjrt header must not.
#include "mesh/mesh.h"
#include "pjrt/pjrt_c_api.h"
