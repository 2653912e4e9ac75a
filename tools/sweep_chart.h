// SVG charts of `simulate`'s sweeps. --sweep-mesh: per mesh shape, the
// latency of an image (seconds, its ICI part shaded) and the throughput
// (images/s), each against its own axis, and whether the shape fits the
// chip's HBM. --sweep-dataflow: per VMEM size, a bar per dataflow in three
// panels: modelled time, HBM traffic and estimated energy. Plain SVG 1.1,
// no scripts, readable in any browser and in docs.
#ifndef TPUMESH_TOOLS_SWEEP_CHART_H_
#define TPUMESH_TOOLS_SWEEP_CHART_H_

#include <string>
#include <vector>

#include "pipeline/simulate.h"

namespace tpumesh::tools {

std::string SweepChartSvg(const std::vector<pipeline::MeshSweepRow>& rows, const std::string& title);
std::string DataflowChartSvg(const std::vector<pipeline::DataflowSweepRow>& rows, const std::string& title);

}  // namespace tpumesh::tools

#endif  // TPUMESH_TOOLS_SWEEP_CHART_H_
