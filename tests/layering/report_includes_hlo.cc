// Layering probe (tests/layering/CMakeLists.txt): a file of the report
// layer, compiled with tpumesh_report's usage requirements only, that
// reaches up into hlo/ (a layer above it). Its own layer's header resolves;
// the hlo header must not.
#include "report/report.h"
#include "hlo/program.h"
