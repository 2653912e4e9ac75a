// Layering probe (tests/layering/CMakeLists.txt): a file of the models layer,
// compiled with tpumesh_models' usage requirements only, that reaches up into
// pipeline/. Its own layer's header resolves; the pipeline header must not,
// so this file never compiles and the ctest passes only on that error.
#include "models/unet.h"
#include "pipeline/generate.h"
