// Layering probe (tests/layering/CMakeLists.txt): io, text and schedulers are
// siblings and do not see each other. A file of the schedulers layer,
// compiled with tpumesh_schedulers' usage requirements only, includes text/.
#include "schedulers/schedulers.h"
#include "text/tokenizer.h"
