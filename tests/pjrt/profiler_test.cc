// The plugin's profiler extension (pjrt/profiler.h) as jaxlib drives it:
// found on PJRT_Api's extension chain, a session created, started, a
// program executed on two devices twice, stopped, its XSpace collected by
// both protocols and read back here with a protobuf reader of the test's
// own. Each device's plane must hold one "XLA Ops (modelled)" event per op
// whose duration and start are the report's (tpumesh run's priced ops of
// the same module), one module event per execution as long as the device's
// modelled time, and the host's wall time of each execution.
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "hlo/program.h"
#include "hlo/run.h"
#include "pjrt/profiler.h"
#include "pjrt/profiler_c_api.h"
#include "pjrt/xspace.h"
#include "tests/testing/pjrt_api.h"

namespace tpumesh::pjrt {
namespace {

using namespace testing;  // NOLINT: the tests' helpers

// ---- A protobuf reader of the test's own: a message as its fields.
struct Field {
  uint32_t number = 0;
  uint64_t varint = 0;     // wire types 0 and 1 (fixed64's bits)
  std::string_view bytes;  // wire type 2
};

std::vector<Field> Fields(std::string_view b) {
  std::vector<Field> out;
  size_t i = 0;
  auto varint = [&]() {
    uint64_t v = 0;
    for (int shift = 0; i < b.size(); shift += 7) {
      const auto c = static_cast<uint8_t>(b[i++]);
      v |= static_cast<uint64_t>(c & 0x7f) << shift;
      if (c < 0x80) break;
    }
    return v;
  };
  while (i < b.size()) {
    const uint64_t key = varint();
    Field f;
    f.number = static_cast<uint32_t>(key >> 3);
    switch (key & 7) {
      case 0:
        f.varint = varint();
        break;
      case 1:
        std::memcpy(&f.varint, b.data() + i, 8);
        i += 8;
        break;
      case 2: {
        const size_t n = varint();
        f.bytes = b.substr(i, n);
        i += n;
        break;
      }
      default:
        ADD_FAILURE() << "wire type " << (key & 7);
        return out;
    }
    out.push_back(f);
  }
  return out;
}

struct Event {
  std::string name;
  int64_t offset_ps = 0, duration_ps = 0;
  std::map<std::string, double> numbers;
  std::map<std::string, std::string> strings;
};
struct Line {
  std::string name;
  int64_t timestamp_ns = 0;
  std::vector<Event> events;
};
struct Plane {
  std::string name;
  std::map<std::string, Line> lines;
  std::map<std::string, std::string> stats;
};

// XSpace -> planes by name (tensorflow.profiler.XSpace's field numbers).
std::map<std::string, Plane> ReadXSpace(std::string_view bytes) {
  std::map<std::string, Plane> planes;
  for (const Field& pf : Fields(bytes)) {
    if (pf.number != 1) continue;
    Plane p;
    std::map<uint64_t, std::string> event_names, stat_names;
    std::vector<std::string_view> lines, stats;
    for (const Field& f : Fields(pf.bytes)) {
      if (f.number == 2) p.name = std::string(f.bytes);
      if (f.number == 3) lines.push_back(f.bytes);
      if (f.number == 6) stats.push_back(f.bytes);
      if (f.number == 4 || f.number == 5) {  // map<int64, X...Metadata>
        uint64_t key = 0;
        std::string name;
        for (const Field& e : Fields(f.bytes)) {
          if (e.number == 1) key = e.varint;
          if (e.number == 2)
            for (const Field& m : Fields(e.bytes))
              if (m.number == 2) name = std::string(m.bytes);
        }
        (f.number == 4 ? event_names : stat_names)[key] = name;
      }
    }
    auto read_stat = [&](std::string_view b,
                         std::map<std::string, double>& numbers,
                         std::map<std::string, std::string>& strings) {
      std::string name;
      for (const Field& s : Fields(b)) {
        if (s.number == 1) name = stat_names[s.varint];
        if (s.number == 2) std::memcpy(&numbers[name], &s.varint, 8);
        if (s.number == 4)
          numbers[name] = static_cast<double>(static_cast<int64_t>(s.varint));
        if (s.number == 5) strings[name] = std::string(s.bytes);
      }
    };
    for (std::string_view b : stats) {
      std::map<std::string, double> numbers;
      read_stat(b, numbers, p.stats);
    }
    for (std::string_view lb : lines) {
      Line l;
      for (const Field& f : Fields(lb)) {
        if (f.number == 2) l.name = std::string(f.bytes);
        if (f.number == 3) l.timestamp_ns = static_cast<int64_t>(f.varint);
        if (f.number != 4) continue;
        Event e;
        for (const Field& x : Fields(f.bytes)) {
          if (x.number == 1) e.name = event_names[x.varint];
          if (x.number == 2) e.offset_ps = static_cast<int64_t>(x.varint);
          if (x.number == 3) e.duration_ps = static_cast<int64_t>(x.varint);
          if (x.number == 4) read_stat(x.bytes, e.numbers, e.strings);
        }
        l.events.push_back(std::move(e));
      }
      p.lines[l.name] = std::move(l);
    }
    planes[p.name] = std::move(p);
  }
  return planes;
}

// ---- The profiler as jaxlib finds and drives it.
const PLUGIN_Profiler_Api* FindProfilerApi(const PJRT_Api& api) {
  for (const PJRT_Extension_Base* e = api.extension_start; e != nullptr;
       e = e->next)
    if (static_cast<int>(e->type) == kPjrtProfilerExtensionType)
      return reinterpret_cast<const PJRT_Profiler_Extension*>(e)->profiler_api;
  return nullptr;
}

// Two partitions, x split by rows: a dot and a tanh on each device.
constexpr char kSharded[] =
    "module @jit_g attributes {mhlo.num_partitions = 2 : i32, "
    "mhlo.num_replicas = 1 : i32} {\n"
    "  sdy.mesh @mesh = <[\"data\"=2]>\n"
    "  func.func public @main(%x: tensor<8x16xf32> {sdy.sharding = "
    "#sdy.sharding<@mesh, [{\"data\"}, {}]>},\n"
    "                         %w: tensor<16x4xf32> {sdy.sharding = "
    "#sdy.sharding<@mesh, [{}, {}]>})\n"
    "      -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, "
    "[{\"data\"}, {}]>}) {\n"
    "    %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : "
    "(tensor<8x16xf32>, tensor<16x4xf32>) -> "
    "tensor<8x4xf32>\n"
    "    %1 = stablehlo.tanh %0 : tensor<8x4xf32>\n"
    "    return %1 : tensor<8x4xf32>\n"
    "  }\n"
    "}\n";

void Execute(TestClient& c, PJRT_LoadedExecutable* exe,
             const std::vector<int>& devices) {
  PJRT_Error* error = nullptr;
  const std::vector<float> x(4 * 16, 1.0f), w(16 * 4, 0.5f);
  std::vector<std::vector<PJRT_Buffer*>> in;
  std::vector<PJRT_Buffer*> out(devices.size(), nullptr);
  std::vector<PJRT_Buffer* const*> arg_lists;
  std::vector<PJRT_Buffer**> out_lists;
  for (size_t d = 0; d < devices.size(); ++d) {
    in.push_back({FromHost(c, x.data(), PJRT_Buffer_Type_F32, {4, 16}, {},
                           devices[d], &error),
                  FromHost(c, w.data(), PJRT_Buffer_Type_F32, {16, 4}, {},
                           devices[d], &error)});
    ExpectOk(c.api, error);
  }
  for (size_t d = 0; d < devices.size(); ++d) {
    arg_lists.push_back(in[d].data());
    out_lists.push_back(&out[d]);
  }
  auto options = Make<PJRT_ExecuteOptions>();
  auto run = Make<PJRT_LoadedExecutable_Execute_Args>();
  run.executable = exe;
  run.options = &options;
  run.argument_lists = arg_lists.data();
  run.num_devices = devices.size();
  run.num_args = 2;
  run.output_lists = out_lists.data();
  ExpectOk(c.api, c.api.PJRT_LoadedExecutable_Execute(&run));
  for (auto& row : in)
    for (PJRT_Buffer* b : row) DestroyBuffer(c.api, b);
  for (PJRT_Buffer* b : out)
    if (b != nullptr) DestroyBuffer(c.api, b);
}

TEST(PjrtProfilerTest, TheExtensionIsOnTheChainAsJaxlibChecksIt) {
  const PLUGIN_Profiler_Api* p = FindProfilerApi(*GetPjrtApi());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->struct_size, 80u);  // jaxlib refuses any other size
  for (auto* fn :
       {reinterpret_cast<void*>(p->error_destroy),
        reinterpret_cast<void*>(p->error_message),
        reinterpret_cast<void*>(p->error_get_code),
        reinterpret_cast<void*>(p->create), reinterpret_cast<void*>(p->destroy),
        reinterpret_cast<void*>(p->start), reinterpret_cast<void*>(p->stop),
        reinterpret_cast<void*>(p->collect_data)})
    EXPECT_NE(fn, nullptr);
}

TEST(PjrtProfilerTest, ErrorsAreReturnedNotThrown) {
  const PLUGIN_Profiler_Api* p = FindProfilerApi(*GetPjrtApi());
  ASSERT_NE(p, nullptr);
  PLUGIN_Profiler_Start_Args start{};  // no profiler
  PLUGIN_Profiler_Error* error = p->start(&start);
  ASSERT_NE(error, nullptr);
  PLUGIN_Profiler_Error_Message_Args m{};
  m.error = error;
  p->error_message(&m);
  EXPECT_EQ(std::string(m.message, m.message_size),
            "tpumesh: PLUGIN_Profiler_Start: no profiler");
  PLUGIN_Profiler_Error_GetCode_Args code{};
  code.error = error;
  EXPECT_EQ(p->error_get_code(&code), nullptr);
  EXPECT_EQ(code.code, 3);  // INVALID_ARGUMENT
  PLUGIN_Profiler_Error_Destroy_Args destroy{};
  destroy.error = error;
  p->error_destroy(&destroy);
}

TEST(PjrtProfilerTest, EachDevicePlaneHoldsTheReportsModelledOps) {
  const PJRT_Api& api = *GetPjrtApi();
  const PLUGIN_Profiler_Api* prof = FindProfilerApi(api);
  ASSERT_NE(prof, nullptr);
  TestClient c(api);
  PJRT_Error* error = nullptr;
  const std::vector<int> devices = {2, 5};
  PJRT_LoadedExecutable* exe =
      Compile(c, kSharded, OptionsOnDevices({2, 5}), &error);
  ExpectOk(api, error);
  ASSERT_NE(exe, nullptr);
  Execute(c, exe, devices);  // before the session: not in it

  // jaxlib's calls leave struct_size unset: garbage must not matter.
  PLUGIN_Profiler_Create_Args create;
  std::memset(&create, 0xab, sizeof create);
  create.options = nullptr;
  create.options_size = 0;
  ASSERT_EQ(prof->create(&create), nullptr);
  PLUGIN_Profiler_Start_Args start{};
  start.profiler = create.profiler;
  ASSERT_EQ(prof->start(&start), nullptr);
  EXPECT_TRUE(ProfilingActive());
  const int64_t before = WallNanos();
  Execute(c, exe, devices);
  Execute(c, exe, devices);
  const int64_t after = WallNanos();
  PLUGIN_Profiler_Stop_Args stop{};
  stop.profiler = create.profiler;
  ASSERT_EQ(prof->stop(&stop), nullptr);
  EXPECT_FALSE(ProfilingActive());
  Execute(c, exe, devices);  // after it: not in it either

  // Newer jaxlib: one call, the plugin's bytes; the documented protocol: a
  // second call into the caller's buffer. The same bytes.
  PLUGIN_Profiler_CollectData_Args collect{};
  collect.profiler = create.profiler;
  ASSERT_EQ(prof->collect_data(&collect), nullptr);
  ASSERT_NE(collect.buffer, nullptr);
  ASSERT_GT(collect.buffer_size_in_bytes, 0u);
  const std::string bytes(reinterpret_cast<const char*>(collect.buffer),
                          collect.buffer_size_in_bytes);
  std::string copy(collect.buffer_size_in_bytes, '\0');
  collect.buffer = reinterpret_cast<uint8_t*>(copy.data());
  ASSERT_EQ(prof->collect_data(&collect), nullptr);
  EXPECT_EQ(copy, bytes);
  PLUGIN_Profiler_Destroy_Args destroy{};
  destroy.profiler = create.profiler;
  ASSERT_EQ(prof->destroy(&destroy), nullptr);

  // What the report gives for the same module on the same two devices.
  auto m = hlo::ParseModule(kSharded, "jit_g.mlir");
  ASSERT_TRUE(m.ok()) << m.status().message();
  hlo::RunOptions o;
  o.program = "jit_g";
  o.keep_ops = true;
  auto want = hlo::RunModule(*m, o, [](const hlo::Layout& layout) {
    std::vector<hlo::Tensor> in;
    for (const hlo::Type& t : layout.inputs) {
      hlo::Tensor x;
      x.type = t;
      x.data = mesh::Array::Host(mesh::DType::kU8, {t.size_bytes()});
      std::memset(x.data.mutable_raw(), 0, static_cast<size_t>(t.size_bytes()));
      in.push_back(std::move(x));
    }
    return StatusOr<std::vector<hlo::Tensor>>(std::move(in));
  });
  ASSERT_TRUE(want.ok()) << want.status().message();
  ASSERT_EQ(want->report.logs.size(), 2u);

  const auto planes = ReadXSpace(bytes);
  ASSERT_EQ(planes.size(), 2u);
  for (size_t d = 0; d < devices.size(); ++d) {
    const std::string name = "/device:TPU:" + std::to_string(devices[d]);
    ASSERT_TRUE(planes.count(name)) << name;
    const Plane& p = planes.at(name);
    EXPECT_EQ(p.stats.at("chip"), want->report.chip.name);
    EXPECT_NE(p.stats.at("tpumesh").find("modelled"), std::string::npos);
    const Line& ops = p.lines.at("XLA Ops (modelled)");
    const Line& modules = p.lines.at("XLA Modules (modelled)");
    const Line& host = p.lines.at("Host wall time (measured)");
    const mesh::DeviceCostLog& log = want->report.logs[d];
    const auto& priced = log.ops();
    ASSERT_FALSE(priced.empty());
    ASSERT_EQ(modules.events.size(), 2u) << name;
    ASSERT_EQ(host.events.size(), 2u) << name;
    ASSERT_EQ(ops.events.size(), 2 * priced.size()) << name;
    EXPECT_EQ(ops.timestamp_ns, modules.timestamp_ns);
    for (int run = 0; run < 2; ++run) {
      const Event& module = modules.events[static_cast<size_t>(run)];
      EXPECT_EQ(module.name, "jit_g");
      EXPECT_EQ(module.duration_ps, Picoseconds(log.seconds()));
      EXPECT_GT(module.duration_ps, 0);
      for (size_t k = 0; k < priced.size(); ++k) {
        const Event& e =
            ops.events[static_cast<size_t>(run) * priced.size() + k];
        EXPECT_EQ(e.name, priced[k].op.name);
        EXPECT_EQ(e.duration_ps,
                  Picoseconds(priced[k].timing.seconds * priced[k].op.repeat))
            << e.name;
        EXPECT_EQ(e.offset_ps - module.offset_ps,
                  Picoseconds(priced[k].start_seconds))
            << e.name;
        EXPECT_DOUBLE_EQ(e.numbers.at("modelled_us"),
                         priced[k].timing.seconds * priced[k].op.repeat * 1e6);
        EXPECT_EQ(e.strings.at("op type"), priced[k].op.type);
        EXPECT_GT(e.numbers.at("host_us"),
                  0);  // measured: the op ran on this host
      }
      // The host's wall time: within the test's own clock readings.
      const Event& h = host.events[static_cast<size_t>(run)];
      const int64_t start_ns = host.timestamp_ns + h.offset_ps / 1000;
      EXPECT_GE(start_ns, before);
      EXPECT_LE(start_ns + h.duration_ps / 1000, after);
      EXPECT_GT(h.duration_ps, 0);
      // The modelled span starts when the host launched it, or later.
      EXPECT_GE(modules.timestamp_ns * 1000 + module.offset_ps,
                host.timestamp_ns * 1000 + h.offset_ps);
    }
    // The second run starts after the first's modelled end.
    EXPECT_GE(modules.events[1].offset_ps,
              modules.events[0].offset_ps + modules.events[0].duration_ps);
  }
  auto done = Make<PJRT_LoadedExecutable_Destroy_Args>();
  done.executable = exe;
  ExpectOk(api, api.PJRT_LoadedExecutable_Destroy(&done));
}

TEST(PjrtProfilerTest, ASessionWithNothingRunGivesAnEmptySpace) {
  const PLUGIN_Profiler_Api* prof = FindProfilerApi(*GetPjrtApi());
  ASSERT_NE(prof, nullptr);
  PLUGIN_Profiler_Create_Args create{};
  ASSERT_EQ(prof->create(&create), nullptr);
  PLUGIN_Profiler_Start_Args start{};
  start.profiler = create.profiler;
  ASSERT_EQ(prof->start(&start), nullptr);
  PLUGIN_Profiler_CollectData_Args
      collect{};  // collected while started: stops it
  collect.profiler = create.profiler;
  ASSERT_EQ(prof->collect_data(&collect), nullptr);
  EXPECT_EQ(collect.buffer_size_in_bytes, 0u);
  EXPECT_FALSE(ProfilingActive());
  PLUGIN_Profiler_Destroy_Args destroy{};
  destroy.profiler = create.profiler;
  ASSERT_EQ(prof->destroy(&destroy), nullptr);
}

// Executions recorded out of launch order (several threads finish in any
// order): placed by launch, no negative offset, the modelled lines never
// overlapping themselves.
TEST(PjrtProfilerTest, ExecutionsArePlacedInLaunchOrder) {
  auto report = [](double seconds) {
    auto r = std::make_shared<report::RunReport>();
    mesh::DeviceCostLog log;
    log.set_keep_ops(true);
    mesh::OpRecord op;
    op.name = "dot_general";
    op.type = "matmul";
    mesh::OpTiming t;
    t.seconds = seconds;
    log.Add(op, t);
    r->logs.push_back(log);
    return r;
  };
  ProfiledExecution late{
      "late", 2'000'000'000, 2'000'001'000, {4}, report(5e-3)};
  ProfiledExecution early{
      "early", 1'999'999'000, 2'000'000'500, {4}, report(5e-3)};
  const auto planes = ReadXSpace(SerializeXSpace({late, early}));
  ASSERT_EQ(planes.size(), 1u);
  const Plane& p = planes.at("/device:TPU:4");
  const Line& modules = p.lines.at("XLA Modules (modelled)");
  const Line& host = p.lines.at("Host wall time (measured)");
  ASSERT_EQ(modules.events.size(), 2u);
  EXPECT_EQ(modules.events[0].name, "early");
  EXPECT_EQ(modules.events[1].name, "late");
  EXPECT_EQ(modules.timestamp_ns, 1'999'999'000);
  EXPECT_EQ(modules.events[0].offset_ps, 0);
  // 5 ms modelled: the second waits for the first on the device.
  EXPECT_EQ(modules.events[1].offset_ps, Picoseconds(5e-3));
  ASSERT_EQ(host.events.size(), 2u);
  EXPECT_EQ(host.events[0].offset_ps, 0);
  EXPECT_EQ(host.events[1].offset_ps, 1'000'000);  // 1 us later, in ps
  EXPECT_EQ(host.events[1].duration_ps, 1'000'000);
}

TEST(PjrtProfilerTest, PicosecondsRound) {
  EXPECT_EQ(Picoseconds(1.5e-12), 2);
  EXPECT_EQ(Picoseconds(1e-6), 1000000);
  EXPECT_EQ(SerializeXSpace({}), "");
}

}  // namespace
}  // namespace tpumesh::pjrt
