// The kHighway matmul provider: compiles kernels/matmul-inl.h once per
// Highway target and exports one dispatch table. Dispatch happens once per
// call at the entry point (HighwayBlockFn), never inside the loops.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul_highway.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"
#include "kernels/matmul-inl.h"

#if HWY_ONCE
#include <string_view>

#include "hwy/targets.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"

namespace tpumesh::kernels {

HWY_EXPORT(HwyMatmulBlock);
HWY_EXPORT(HwyMatmulTarget);
HWY_EXPORT(HwyMatmulRowsPerBlock);
HWY_EXPORT(HwyMatmulRowsPerTile);

std::string_view HighwayTargetName() {
  return hwy::TargetName(HWY_DYNAMIC_DISPATCH(HwyMatmulTarget)());
}

namespace matmul_internal {

DriverShape HighwayDriverShape() {
  return {HWY_DYNAMIC_DISPATCH(HwyMatmulRowsPerTile)(), HWY_DYNAMIC_DISPATCH(HwyMatmulRowsPerBlock)()};
}

BlockFn HighwayBlockFn() {
  // The first dispatched call picks the target; after it the table entry is
  // the target's function itself, not the initialising trampoline.
  HWY_DYNAMIC_DISPATCH(HwyMatmulTarget)();
  return HWY_DYNAMIC_DISPATCH(HwyMatmulBlock);
}

}  // namespace matmul_internal
}  // namespace tpumesh::kernels
#endif  // HWY_ONCE
