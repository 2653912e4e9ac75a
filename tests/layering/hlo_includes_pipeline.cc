// Layering probe (tests/layering/CMakeLists.txt): a file of the hlo layer,
// compiled with tpumesh_hlo's usage requirements only, that reaches across
// into pipeline/ (its sibling). Its own layer's header resolves; the
// pipeline header must not.
#include "hlo/program.h"
#include "pipeline/generate.h"
