// Layering probe (tests/layering/CMakeLists.txt): a file of the io layer,
// compiled with tpumesh_io's usage requirements only, that reaches up into
// pipeline/. Its own layer's header resolves; the pipeline header must not.
#include "io/png.h"
#include "pipeline/generate.h"
