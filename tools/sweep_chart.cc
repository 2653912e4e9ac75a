#include "tools/sweep_chart.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "base/printable.h"

namespace tpumesh::tools {
namespace {

std::string Num(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

// Text as an SVG (XML) text node: valid UTF-8 without control characters
// (base/printable.h: a file name's stray byte as \xNN), then <, >, & as
// entities.
std::string Escape(const std::string& s) {
  std::string o;
  for (char c : Printable(s)) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else o += c;
  }
  return o;
}

// The opening tag, a white background, the title and the subtitle.
void Header(std::ostringstream& o, int width, int height, int left, const std::string& title,
            const std::string& subtitle) {
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << left << "\" y=\"22\" font-size=\"15\">" << Escape(title) << "</text>\n";
  o << "<text x=\"" << left << "\" y=\"40\" fill=\"#555\">" << Escape(subtitle) << "</text>\n";
}

// A panel's axes, label and five gridlines from 0 to max_v; its plot area
// spans x0..x0 + w and top..y0 (the baseline).
void Axes(std::ostringstream& o, int x0, int top, int y0, int w, const std::string& label, double max_v,
          int small_digits) {
  o << "<line x1=\"" << x0 << "\" y1=\"" << top << "\" x2=\"" << x0 << "\" y2=\"" << y0 << "\" stroke=\"black\"/>\n";
  o << "<line x1=\"" << x0 << "\" y1=\"" << y0 << "\" x2=\"" << x0 + w << "\" y2=\"" << y0 << "\" stroke=\"black\"/>\n";
  o << "<text x=\"" << x0 + 4 << "\" y=\"" << top - 10 << "\" font-weight=\"bold\">" << Escape(label) << "</text>\n";
  for (int t = 0; t <= 4; ++t) {
    const double v = max_v * t / 4, y = y0 - (y0 - top) * t / 4.0;
    o << "<text x=\"" << x0 - 6 << "\" y=\"" << Num(y + 4, 1) << "\" text-anchor=\"end\">"
      << Num(v, v >= 10 ? 1 : small_digits) << "</text>\n";
    o << "<line x1=\"" << x0 << "\" y1=\"" << Num(y, 1) << "\" x2=\"" << x0 + w << "\" y2=\"" << Num(y, 1)
      << "\" stroke=\"#ddd\"/>\n";
  }
}

}  // namespace

std::string SweepChartSvg(const std::vector<pipeline::MeshSweepRow>& rows, const std::string& title) {
  const int panel_w = 360, panel_h = 220, top = 76, left = 60, gap = 70, bar_gap = 12;
  const int width = left + 2 * panel_w + gap + 30, height = top + panel_h + 90;
  double max_s = 0, max_ips = 0;
  for (const auto& r : rows) {
    max_s = std::max(max_s, r.seconds);
    max_ips = std::max(max_ips, r.images_per_second);
  }
  std::ostringstream o;
  Header(o, width, height, left, title, "modelled on the emulated chip (tpumesh simulate --sweep-mesh); nothing computed");
  const int n = std::max<int>(1, static_cast<int>(rows.size()));
  const double bar_w = (panel_w - bar_gap * (n + 1)) / static_cast<double>(n);
  for (int panel = 0; panel < 2; ++panel) {
    const int x0 = left + panel * (panel_w + gap), y0 = top + panel_h;
    const double max_v = panel == 0 ? max_s : max_ips;
    Axes(o, x0, top, y0, panel_w,
         panel == 0 ? "latency: seconds per image (its ICI part dark)" : "throughput: images per second", max_v, 2);
    for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
      const auto& r = rows[i];
      const double v = panel == 0 ? r.seconds : r.images_per_second;
      const double h = max_v > 0 ? panel_h * v / max_v : 0;
      const double x = x0 + bar_gap + i * (bar_w + bar_gap);
      const char* fill = !r.fits ? "#d9534f" : panel == 0 ? "#4a7bd0" : "#5cb85c";
      o << "<rect x=\"" << Num(x, 1) << "\" y=\"" << Num(y0 - h, 1) << "\" width=\"" << Num(bar_w, 1)
        << "\" height=\"" << Num(h, 1) << "\" fill=\"" << fill << "\"/>\n";
      if (panel == 0 && r.ici_share > 0) {
        const double hi = h * r.ici_share;
        o << "<rect x=\"" << Num(x, 1) << "\" y=\"" << Num(y0 - hi, 1) << "\" width=\"" << Num(bar_w, 1)
          << "\" height=\"" << Num(hi, 1) << "\" fill=\"#1d3b70\"/>\n";
      }
      o << "<text x=\"" << Num(x + bar_w / 2, 1) << "\" y=\"" << Num(y0 - h - 4, 1) << "\" text-anchor=\"middle\">"
        << Num(v, v >= 10 ? 1 : 2) << "</text>\n";
      o << "<text x=\"" << Num(x + bar_w / 2, 1) << "\" y=\"" << y0 + 16 << "\" text-anchor=\"middle\">d="
        << r.data << (r.fsdp > 1 ? " f=" + std::to_string(r.fsdp) : std::string()) << "</text>\n";
      o << "<text x=\"" << Num(x + bar_w / 2, 1) << "\" y=\"" << y0 + 30 << "\" text-anchor=\"middle\">m="
        << r.model << "</text>\n";
    }
  }
  o << "<text x=\"" << left << "\" y=\"" << height - 14
    << "\" fill=\"#555\">d = data axis (images in parallel), f = fsdp axis (images too, weights sharded), m = "
       "model axis (each model split m ways); red: does not fit the chip's HBM</text>\n";
  o << "</svg>\n";
  return o.str();
}

std::string DataflowChartSvg(const std::vector<pipeline::DataflowSweepRow>& rows, const std::string& title) {
  // Groups: the VMEM sizes in the order first seen; in each, a bar per
  // dataflow in the order first seen.
  std::vector<double> vmems;
  std::vector<std::string> flows;
  for (const auto& r : rows) {
    if (std::find(vmems.begin(), vmems.end(), r.vmem_mib) == vmems.end()) vmems.push_back(r.vmem_mib);
    if (std::find(flows.begin(), flows.end(), r.dataflow) == flows.end()) flows.push_back(r.dataflow);
  }
  struct Panel {
    const char* label;
    double scale;  // value shown = field x scale
    double pipeline::DataflowSweepRow::*field;
  };
  const Panel panels[] = {{"modelled time (ms)", 1e3, &pipeline::DataflowSweepRow::seconds},
                          {"HBM traffic (GB)", 1e-9, &pipeline::DataflowSweepRow::hbm_bytes},
                          {"energy, estimated (J)", 1, &pipeline::DataflowSweepRow::energy_joules}};
  const char* colours[] = {"#4a7bd0", "#5cb85c", "#e0a030", "#888888"};
  const int panel_w = 300, panel_h = 200, top = 76, left = 60, gap = 70;
  const int width = left + 3 * panel_w + 2 * gap + 30, height = top + panel_h + 80;
  std::ostringstream o;
  Header(o, width, height, left, title,
         "modelled on the emulated chip (tpumesh simulate --sweep-dataflow), all devices; energy from "
         "per-operation estimates; nothing computed");
  const int groups = std::max<int>(1, static_cast<int>(vmems.size()));
  const int bars = std::max<int>(1, static_cast<int>(flows.size()));
  const double group_w = panel_w / static_cast<double>(groups), bar_w = (group_w - 14) / bars;
  for (int p = 0; p < 3; ++p) {
    const Panel& panel = panels[p];
    const int x0 = left + p * (panel_w + gap), y0 = top + panel_h;
    double max_v = 0;
    for (const auto& r : rows) max_v = std::max(max_v, r.*panel.field * panel.scale);
    Axes(o, x0, top, y0, panel_w, panel.label, max_v, 3);
    for (const auto& r : rows) {
      const int g = static_cast<int>(std::find(vmems.begin(), vmems.end(), r.vmem_mib) - vmems.begin());
      const int b = static_cast<int>(std::find(flows.begin(), flows.end(), r.dataflow) - flows.begin());
      const double v = r.*panel.field * panel.scale, h = max_v > 0 ? panel_h * v / max_v : 0;
      const double x = x0 + g * group_w + 7 + b * bar_w;
      o << "<rect x=\"" << Num(x, 1) << "\" y=\"" << Num(y0 - h, 1) << "\" width=\"" << Num(bar_w - 1, 1)
        << "\" height=\"" << Num(h, 1) << "\" fill=\"" << colours[std::min(b, 3)] << "\"><title>" << Escape(r.dataflow)
        << ", VMEM " << Num(r.vmem_mib, 0) << " MiB: " << Num(v, 4) << "</title></rect>\n";
    }
    for (int g = 0; g < static_cast<int>(vmems.size()); ++g)
      o << "<text x=\"" << Num(x0 + (g + 0.5) * group_w, 1) << "\" y=\"" << y0 + 16 << "\" text-anchor=\"middle\">"
        << Num(vmems[g], 0) << "</text>\n";
    o << "<text x=\"" << x0 + panel_w / 2 << "\" y=\"" << y0 + 32 << "\" text-anchor=\"middle\" fill=\"#555\">VMEM "
      << "per TensorCore (MiB)</text>\n";
  }
  int lx = left;
  for (int b = 0; b < static_cast<int>(flows.size()); ++b) {
    o << "<rect x=\"" << lx << "\" y=\"" << height - 24 << "\" width=\"12\" height=\"12\" fill=\""
      << colours[std::min(b, 3)] << "\"/>\n";
    o << "<text x=\"" << lx + 16 << "\" y=\"" << height - 14 << "\">" << Escape(flows[b]) << "</text>\n";
    lx += 60;
  }
  o << "<text x=\"" << lx + 10 << "\" y=\"" << height - 14
    << "\" fill=\"#555\">ws / os / is: weight / output / input stationary, as SCALE-Sim defines them</text>\n";
  o << "</svg>\n";
  return o.str();
}

}  // namespace tpumesh::tools
