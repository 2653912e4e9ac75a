// Layering probe (tests/layering/CMakeLists.txt): a file of the report
// layer, compiled with tpumesh_report's usage requirements only, that
// reaches up into pipeline/ (a layer above it). Its own layer's header
// resolves; the pipeline header must not.
#include "report/report.h"
#include "pipeline/generate.h"
