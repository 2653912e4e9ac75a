#include "report/report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "base/printable.h"
#include "io/atomic_file.h"
#include "mesh/device.h"
#include "nlohmann/json.hpp"

namespace tpumesh::report {
namespace {

using nlohmann::json;

json EnergyJson(const mesh::EnergyJoules& e) {
  return {{"total", e.total()}, {"mxu", e.mxu}, {"vector", e.vector}, {"vmem", e.vmem}, {"hbm", e.hbm}, {"ici", e.ici}};
}

json Totals(const mesh::OpTypeTotals& t) {
  return {{"count", t.count},
          {"flops", t.flops},
          {"bytes", t.bytes},
          {"transcendentals", t.transcendentals},
          {"modelled_seconds", t.modelled_seconds},
          {"mxu_seconds", t.mxu_seconds},
          {"vector_seconds", t.vector_seconds},
          {"hbm_seconds", t.hbm_seconds},
          {"utilisation", t.utilisation()},
          {"mxu_cycles", t.mxu_cycles},
          {"vmem_bytes", t.vmem_bytes},
          {"ici_seconds", t.ici_seconds},
          {"ici_bytes", t.ici_bytes},
          {"vmem_access_bytes", t.vmem_access_bytes},
          {"energy_joules", EnergyJson(t.energy)},
          {"average_watts", t.average_watts()},
          {"host_seconds", t.host_seconds}};
}

json LayersJson(const mesh::DeviceCostLog& log) {
  json layers = json::array();
  for (const mesh::LayerTotals& l : log.layers()) {
    json row = {{"layer", l.module}, {"op", l.name}, {"type", l.type}, {"shape", l.shape}};
    row.update(Totals(l.totals));
    row["bound"] = l.totals.bound();
    layers.push_back(std::move(row));
  }
  return layers;
}

// A CSV field: quoted when it holds a comma, a quote or a line break; bytes
// that are not UTF-8 replaced by U+FFFD, as in the JSON report.
std::string CsvField(const std::string& raw) {
  const std::string s = ValidUtf8(raw);
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// The sharding plan with what device 0 (model rank 0) sent for each layer:
// the collective (as run; as planned for a layer this run did not reach,
// e.g. the VAE encoder's in generate), how often, the bytes per call and the
// ICI time.
json ShardingPlanJson(const RunReport& r) {
  json plan = json::array();
  static const std::map<std::string, mesh::DeviceCostLog::ModuleCollectives> kNone;
  const auto& by_module = r.logs.empty() ? kNone : r.logs[0].collectives_by_module();
  std::set<std::string> listed;
  auto entry = [&](const std::string& module, const std::string& split, const std::string& collective) {
    json e = {{"module", module}, {"split", split}, {"collective", collective}, {"calls", 0},
              {"bytes_per_call", 0}, {"ici_seconds", 0.0}};
    if (auto it = by_module.find(module); it != by_module.end()) {
      const mesh::OpTypeTotals& t = it->second.totals;
      e["collective"] = it->second.kind;
      e["calls"] = t.count;
      e["bytes_per_call"] = t.count > 0 ? t.ici_bytes / t.count : 0.0;
      e["ici_seconds"] = t.ici_seconds;
    }
    listed.insert(module);
    plan.push_back(std::move(e));
  };
  for (const RunReport::ShardedLayer& l : r.sharding) entry(l.module, l.split, l.collective);
  // Not in the plan: on an fsdp mesh an all_gather is the layer's weight's
  // (docs/sharding.md, "The fsdp axis").
  const bool fsdp = ("," + r.mesh_axes).find(",fsdp=") != std::string::npos;
  for (const auto& [module, c] : by_module)
    if (!listed.count(module))
      entry(module,
            fsdp && ("+" + c.kind + "+").find("+all_gather+") != std::string::npos
                ? "weight sharded over fsdp, all_gathered before the layer"
                : "activations only (no split weights)",
            c.kind);
  return plan;
}

}  // namespace

void RunReport::Finish(const std::vector<std::vector<mesh::OpRecord>>& records, bool keep_ops) {
  std::vector<int> of_device(records.size());
  for (size_t d = 0; d < records.size(); ++d) of_device[d] = static_cast<int>(d);
  Finish(records, of_device, keep_ops);
}

void RunReport::Finish(const std::vector<std::vector<mesh::OpRecord>>& distinct, const std::vector<int>& of_device,
                       bool keep_ops) {
  std::vector<mesh::DeviceCostLog> priced(distinct.size());
  for (size_t i = 0; i < distinct.size(); ++i) {
    priced[i].set_keep_ops(keep_ops);
    priced[i].set_overlap(overlap);
    for (const mesh::OpRecord& op : distinct[i]) priced[i].Add(op, mesh::PriceOp(op, chip), op.repeat);
  }
  logs.clear();
  logs.reserve(of_device.size());
  for (const int i : of_device) logs.push_back(priced[i]);
}

double RunReport::modelled_seconds() const {
  double m = 0;
  for (const auto& l : logs) m = std::max(m, l.seconds());
  return m;
}

double RunReport::serial_modelled_seconds() const {
  double m = 0;
  for (const auto& l : logs) m = std::max(m, l.serial_seconds());
  return m;
}

mesh::OpTypeTotals AllDevicesTotals(const RunReport& r) {
  mesh::OpTypeTotals all;
  for (const auto& l : r.logs) {
    const mesh::OpTypeTotals t = l.total();
    all.flops += t.flops;
    all.bytes += t.bytes;
    all.mxu_cycles += t.mxu_cycles;
    all.mxu_useful_macs += t.mxu_useful_macs;
    all.mxu_capacity_macs += t.mxu_capacity_macs;
    all.ici_bytes += t.ici_bytes;
    all.ici_seconds = std::max(all.ici_seconds, t.ici_seconds);
    all.energy.Add(t.energy);
  }
  return all;
}

std::string ReportJson(const RunReport& r) {
  json summary = {{"mode", r.mode},
                  {"modelled_seconds", r.modelled_seconds()},
                  {"overlap", r.overlap ? "on" : "off"},
                  {"serial_modelled_seconds", r.serial_modelled_seconds()},
                  {"ici_hidden_seconds", r.serial_modelled_seconds() - r.modelled_seconds()},
                  {"host_seconds", r.host_seconds},
                  {"images", r.images},
                  {"chip", r.chip.name},
                  {"attention", std::string(mesh::AttentionKernelName(r.chip.attention))},
                  {"devices", r.devices},
                  {"chips", r.devices / std::max(1, r.chip.devices_per_chip)},
                  {"modelled", "time on the emulated chip from the cost model (docs/cost-model.md)"}};
  const mesh::OpTypeTotals all = AllDevicesTotals(r);
  summary["flops"] = all.flops;
  summary["hbm_bytes"] = all.bytes;
  summary["mxu_utilisation"] = all.utilisation();
  // The ICI: bytes sent by all devices; the busiest device's time in
  // collectives, and its share of the modelled time.
  summary["ici_bytes"] = all.ici_bytes;
  summary["ici_seconds"] = all.ici_seconds;
  summary["ici_share"] = r.modelled_seconds() > 0 ? all.ici_seconds / r.modelled_seconds() : 0.0;
  // Energy: every device's, and as power over the modelled time of the run
  // (the slowest device's): estimates (docs/cost-model.md "Energy").
  summary["energy_joules"] = EnergyJson(all.energy);
  summary["average_watts"] = r.modelled_seconds() > 0 ? all.energy.total() / r.modelled_seconds() : 0.0;
  summary["estimated"] = "energy and power from per-operation energies (dynamic only; docs/cost-model.md)";
  if (!r.host_seconds_per_rank.empty()) summary["host_seconds_per_rank"] = r.host_seconds_per_rank;
  if (!r.mesh_axes.empty()) summary["mesh"] = r.mesh_axes;
  if (!r.param_bytes.empty())
    summary["param_bytes_per_device"] = *std::max_element(r.param_bytes.begin(), r.param_bytes.end());
  if (!r.hbm_peak_bytes.empty()) {
    summary["hbm_peak_bytes"] = *std::max_element(r.hbm_peak_bytes.begin(), r.hbm_peak_bytes.end());
    summary["hbm_capacity_bytes"] = r.chip.hbm_bytes_per_device();
  }
  for (const auto& [k, v] : r.info) summary[k] = v;
  // Streamed device by device, as out.dump(1) would print {"devices",
  // "sharding_plan", "summary"}: a 1024-device report never holds every
  // device's tree at once, and devices that share a log (the replicas of
  // one model rank) are dumped once and told apart by their id.
  auto dump_at = [](const json& j, int depth) {
    const std::string flat = j.dump(1, ' ', false, json::error_handler_t::replace);
    std::string shifted;
    shifted.reserve(flat.size());
    for (const char c : flat) {
      shifted += c;
      if (c == '\n') shifted.append(depth, ' ');
    }
    return shifted;
  };
  std::string out = "{\n \"devices\": [";
  std::map<std::tuple<const void*, int64_t, int64_t>, std::pair<std::string, std::string>> dumped;
  for (size_t d = 0; d < r.logs.size(); ++d) {
    const int64_t peak = d < r.hbm_peak_bytes.size() ? r.hbm_peak_bytes[d] : -1;
    const int64_t params = d < r.param_bytes.size() ? r.param_bytes[d] : -1;
    auto [it, fresh] = dumped.try_emplace({&r.logs[d].layers(), peak, params});
    const std::string id_line = "\n   \"id\": " + std::to_string(d) + ",";
    if (fresh) {
      json by_type = json::object(), by_collective = json::object();
      for (const auto& [type, t] : r.logs[d].by_type()) by_type[type] = Totals(t);
      for (const auto& [kind, t] : r.logs[d].by_collective_hidden()) {
        by_collective[kind] = Totals(t);
        by_collective[kind]["ici_hidden_seconds"] = t.ici_hidden_seconds;
      }
      const mesh::OpTypeTotals t = r.logs[d].total();
      json device = {{"id", d},
                     {"modelled_seconds", r.logs[d].seconds()},
                     {"serial_modelled_seconds", r.logs[d].serial_seconds()},
                     {"ici_hidden_seconds", r.logs[d].ici_hidden_seconds()},
                     {"host_seconds", t.host_seconds},
                     {"ici_bytes", t.ici_bytes},
                     {"ici_seconds", t.ici_seconds},
                     {"totals", Totals(t)},
                     {"by_op_type", by_type},
                     {"by_collective", by_collective},
                     {"layers", LayersJson(r.logs[d])}};
      if (peak >= 0) device["hbm_peak_bytes"] = peak;
      if (params >= 0) device["param_bytes"] = params;
      const std::string text = dump_at(device, 2);
      const size_t at = text.find(id_line);
      it->second = {text.substr(0, at), text.substr(at + id_line.size())};
    }
    out += (d == 0 ? "\n  " : ",\n  ") + it->second.first + id_line + it->second.second;
  }
  out += r.logs.empty() ? "],\n" : "\n ],\n";
  out += " \"sharding_plan\": " + dump_at(ShardingPlanJson(r), 1) + ",\n";
  out += " \"summary\": " + dump_at(summary, 1) + "\n}\n";
  return out;
}

Status WriteReportJson(const std::string& path, const RunReport& r) { return WriteFileAtomic(path, ReportJson(r)); }

std::string LayersCsv(const RunReport& r) {
  std::string s =
      "device,layer,op,type,shape,count,flops,mxu_cycles,mxu_utilisation,vmem_bytes,hbm_bytes,modelled_seconds,"
      "mxu_seconds,vector_seconds,hbm_seconds,ici_seconds,ici_bytes,vmem_access_bytes,energy_joules,mxu_joules,"
      "vector_joules,vmem_joules,hbm_joules,ici_joules,bound\n";
  char num[512];
  for (size_t d = 0; d < r.logs.size(); ++d) {
    for (const mesh::LayerTotals& l : r.logs[d].layers()) {
      const mesh::OpTypeTotals& t = l.totals;
      s += std::to_string(d) + "," + CsvField(l.module) + "," + CsvField(l.name) + "," + CsvField(l.type) + "," +
           CsvField(l.shape);
      std::snprintf(num, sizeof num,
                    ",%lld,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,"
                    "%.17g,%.17g,",
                    static_cast<long long>(t.count), t.flops, t.mxu_cycles, t.utilisation(), t.vmem_bytes, t.bytes,
                    t.modelled_seconds, t.mxu_seconds, t.vector_seconds, t.hbm_seconds, t.ici_seconds, t.ici_bytes,
                    t.vmem_access_bytes, t.energy.total(), t.energy.mxu, t.energy.vector, t.energy.vmem, t.energy.hbm,
                    t.energy.ici);
      s += num + t.bound() + "\n";
    }
  }
  return s;
}

std::string TraceJson(const RunReport& r) {
  // Streamed by hand: traces of long runs hold hundreds of thousands of events.
  std::string s;
  s.reserve(1 << 20);
  s += "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto add = [&](const json& e) {
    if (!first) s += ",\n";
    first = false;
    s += e.dump(-1, ' ', false, json::error_handler_t::replace);  // a name that is not UTF-8 gets U+FFFD
  };
  const char* tracks[] = {"MXU", "vector unit", "HBM DMA", "ICI"};
  const int host_pid = static_cast<int>(r.logs.size()) + 1;
  add({{"ph", "M"}, {"name", "process_name"}, {"pid", host_pid}, {"args", {{"name", "host (wall clock on this machine)"}}}});
  for (size_t d = 0; d < r.logs.size(); ++d) {
    const int pid = static_cast<int>(d) + 1;
    add({{"ph", "M"}, {"name", "process_name"}, {"pid", pid},
         {"args", {{"name", "TPU " + r.chip.name + " device " + std::to_string(d) + " (modelled)"}}}});
    add({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"args", {{"sort_index", pid}}}});
    for (int t = 0; t < 4; ++t)
      add({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", t + 1}, {"args", {{"name", tracks[t]}}}});
    add({{"ph", "M"}, {"name", "thread_name"}, {"pid", host_pid}, {"tid", pid},
         {"args", {{"name", "device " + std::to_string(d) + " thread"}}}});
    double host_now = 0;
    for (const auto& e : r.logs[d].ops()) {
      const double ts = e.start_seconds * 1e6;
      // A record standing for `repeat` identical calls (a workload's repeat,
      // a loop's op run again) is one event as long as all of them; its
      // args are one call's.
      const double n = e.op.repeat, us = 1e6 * n;
      json args = {{"shape", e.op.shape},
                   {"flops", e.op.cost.flops},
                   {"bytes", e.op.cost.bytes()},
                   {"modelled_us", e.timing.seconds * 1e6},
                   {"utilisation", e.timing.utilisation}};
      if (n != 1) args["calls"] = n;
      if (e.timing.mxu_seconds > 0)
        add({{"ph", "X"}, {"name", e.op.name}, {"pid", pid}, {"tid", 1}, {"ts", ts}, {"dur", e.timing.mxu_seconds * us}, {"args", args}});
      if (e.timing.vector_seconds > 0)
        add({{"ph", "X"}, {"name", e.op.name}, {"pid", pid}, {"tid", 2}, {"ts", ts + e.timing.mxu_seconds * us},
             {"dur", e.timing.vector_seconds * us}, {"args", args}});
      if (e.timing.hbm_seconds > 0)
        add({{"ph", "X"}, {"name", e.op.name}, {"pid", pid}, {"tid", 3}, {"ts", ts}, {"dur", e.timing.hbm_seconds * us}, {"args", args}});
      if (e.timing.ici_seconds > 0)
        add({{"ph", "X"}, {"name", e.op.name}, {"pid", pid}, {"tid", 4},
             {"ts", e.ici_start_seconds * 1e6}, {"dur", e.timing.ici_seconds * us},
             {"args", {{"module", e.op.module}, {"shape", e.op.shape}, {"ici_bytes", e.op.ici_bytes},
                       {"flops", e.op.cost.flops}, {"bytes", e.op.cost.bytes()},
                       {"modelled_us", e.timing.seconds * 1e6}}}});
      if (e.op.host_seconds > 0) {
        add({{"ph", "X"}, {"name", e.op.name}, {"pid", host_pid}, {"tid", pid}, {"ts", host_now * 1e6},
             {"dur", e.op.host_seconds * us},
             {"args", {{"shape", e.op.shape}, {"flops", e.op.cost.flops}, {"bytes", e.op.cost.bytes()}}}});
        host_now += e.op.host_seconds * n;
      }
    }
  }
  s += "\n]}\n";
  return s;
}

Status WriteTraceJson(const std::string& path, const RunReport& r) { return WriteFileAtomic(path, TraceJson(r)); }

std::string ReportTable(const RunReport& r) {
  std::ostringstream o;
  char line[320];
  std::snprintf(line, sizeof line, "%-12s %8s %10s %9s %13s %8s %10s\n", "op type", "count", "GFLOP", "GB",
                "modelled s", "MXU", "host s");
  o << "device 0 on " << r.chip.name << " (modelled = the emulated chip, host = this machine):\n" << line;
  if (r.logs.empty()) return o.str();
  auto row = [&](const std::string& name, const mesh::OpTypeTotals& t) {
    std::snprintf(line, sizeof line, "%-12s %8lld %10.2f %9.3f %13.4f %7.0f%% %10.3f\n", name.c_str(),
                  static_cast<long long>(t.count), t.flops / 1e9, t.bytes / 1e9, t.modelled_seconds,
                  100 * t.utilisation(), t.host_seconds);
    o << line;
  };
  for (const auto& [type, t] : r.logs[0].by_type()) row(type, t);
  row("total", r.logs[0].total());
  if (!r.hbm_peak_bytes.empty())
    o << "HBM of device 0: peak " << mesh::FormatBytes(r.hbm_peak_bytes[0]) << " of "
      << mesh::FormatBytes(r.chip.hbm_bytes_per_device()) << " (parameters and live activations)\n";
  if (!r.param_bytes.empty())
    o << "parameters of device 0: " << mesh::FormatBytes(r.param_bytes[0])
      << (r.mesh_axes.empty() ? "" : " over mesh " + r.mesh_axes) << "\n";
  const mesh::OpTypeTotals t = r.logs[0].total();
  std::snprintf(line, sizeof line,
                "energy of device 0 (estimate): %.4g J = MXU %.3g + vector %.3g + VMEM %.3g + HBM %.3g + ICI %.3g; "
                "%.1f W average over %.4f s modelled\n",
                t.energy.total(), t.energy.mxu, t.energy.vector, t.energy.vmem, t.energy.hbm, t.energy.ici,
                r.logs[0].seconds() > 0 ? t.energy.total() / r.logs[0].seconds() : 0.0, r.logs[0].seconds());
  o << line;
  if (t.ici_seconds > 0 || t.ici_bytes > 0) {
    std::snprintf(line, sizeof line,
                  "ICI of device 0: %.3f GB sent, %.4f s modelled (%.1f%% of its serial time), %.4f s of it hidden "
                  "under compute (overlap %s)\n",
                  t.ici_bytes / 1e9, t.ici_seconds,
                  r.logs[0].serial_seconds() > 0 ? 100 * t.ici_seconds / r.logs[0].serial_seconds() : 0.0,
                  r.logs[0].ici_hidden_seconds(), r.overlap ? "on" : "off");
    o << line;
  }
  return o.str();
}

}  // namespace tpumesh::report
