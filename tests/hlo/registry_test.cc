// The op registry (hlo/ops.h), walked whole: every entry has a check, a
// run, a price and a sharding rule, and the ones its class implies; the
// reader resolves every op to its entry; and every elementwise op verifies,
// runs and is priced on a small module, so a row without its scalar math
// fails here.
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hlo/interpreter.h"
#include "hlo/ops.h"
#include "mesh/cost_model.h"

namespace tpumesh::hlo {
namespace {

TEST(RegistryTest, EveryEntryHasEveryRule) {
  std::set<std::string_view> names;
  for (const OpEntry& e : OpTable()) {
    SCOPED_TRACE(std::string(e.name));
    EXPECT_TRUE(names.insert(e.name).second) << "declared twice";
    EXPECT_EQ(FindOp(e.name), &e);
    EXPECT_NE(e.check, Check::kUnset) << "no check";
    EXPECT_NE(e.run, Run::kUnset) << "no run";
    EXPECT_NE(e.price, Price::kUnset) << "no price";
    EXPECT_NE(e.shard, Shard::kUnset) << "no sharding rule";
    EXPECT_FALSE(e.category.empty());
    EXPECT_FALSE(e.priced.empty()) << "no docs for its price";
    EXPECT_TRUE(e.max_operands < 0 || e.max_operands >= e.min_operands);
    EXPECT_TRUE(e.max_regions < 0 || e.max_regions >= e.min_regions);
    const bool elementwise = e.op_class == OpClass::kElementwise;
    EXPECT_EQ(elementwise, e.scalar.kind != ScalarFn::Kind::kNone) << "a scalar function is an elementwise op's";
    EXPECT_EQ(elementwise, e.run == Run::kElementwise);
    if (elementwise) {
      EXPECT_EQ(e.check, Check::kElementwise);
      EXPECT_EQ(e.shard, Shard::kSameDims);
      EXPECT_TRUE(e.fusible);
    }
    // Control and sharding ops run their regions and are not priced
    // themselves; every other op is priced by its own rule.
    const bool runs_regions = e.op_class == OpClass::kControl || e.op_class == OpClass::kSharding;
    if (runs_regions) {
      EXPECT_TRUE(e.price == Price::kRegions || e.price == Price::kFree);
      EXPECT_EQ(e.shard, Shard::kRegions);
    } else {
      EXPECT_NE(e.price, Price::kRegions);
      EXPECT_NE(e.shard, Shard::kRegions);
    }
  }
}

// The two prices the table and the pricing once disagreed on.
TEST(RegistryTest, ElementwisePricesAreTheTables) {
  EXPECT_EQ(FindOp("chlo.next_after")->price, Price::kFlop);
  EXPECT_EQ(FindOp("chlo.erf_inv")->price, Price::kErfInv);
  EXPECT_NE(FindOp("chlo.erf_inv")->priced.find("37 flops and 2 transcendentals"), std::string_view::npos);
}

// A one-op module of `name` over `type` operands.
std::string OneOp(std::string_view name, int operands, const std::string& type, const std::string& result) {
  std::string args, uses, types;
  for (int i = 0; i < operands; ++i) {
    args += (i ? ", " : "") + std::string("%a") + std::to_string(i) + ": " + type;
    uses += (i ? ", " : "") + std::string("%a") + std::to_string(i);
    types += (i ? ", " : "") + type;
  }
  return "func.func @main(" + args + ") -> " + result + " {\n  %0 = \"" + std::string(name) + "\"(" + uses +
         ") : (" + types + ") -> " + result + "\n  return %0 : " + result + "\n}\n";
}

TEST(RegistryTest, EveryUnaryAndBinaryOpVerifiesRunsAndIsPriced) {
  int walked = 0;
  for (const OpEntry& e : OpTable()) {
    const bool unary = e.scalar.kind == ScalarFn::Kind::kUnary, binary = e.scalar.kind == ScalarFn::Kind::kBinary;
    if (!unary && !binary) continue;
    SCOPED_TRACE(std::string(e.name));
    // The first element type the op takes (bitwise ops take no floats).
    bool ran = false;
    for (const std::string el : {"f32", "i32"}) {
      const std::string type = "tensor<4x" + el + ">";
      const std::string result = e.scalar.kind == ScalarFn::Kind::kUnary && e.scalar.un == Un::kIsFinite
                                     ? "tensor<4xi1>"
                                     : type;
      auto m = ParseModule(OneOp(e.name, unary ? 1 : 2, type, result), "registry.mlir");
      ASSERT_TRUE(m.ok()) << m.status().message();
      ASSERT_EQ(m->funcs[0].body.blocks[0].ops[0].entry, &e) << "the reader resolves the op to its entry";
      ASSERT_TRUE(Verify(*m).ok()) << Verify(*m).message();
      std::vector<Tensor> args;
      for (const Type& t : m->funcs[0].arg_types) args.push_back(NewTensor(t, nullptr).value());
      std::vector<mesh::OpRecord> records;
      Options o;
      o.ops = &records;
      auto r = RunFunction(*m, "main", std::move(args), DeviceSite{}, o);
      if (!r.ok()) continue;  // not this element type
      ran = true;
      ASSERT_EQ(records.size(), 1u) << "priced once";
      const double flops = records[0].cost.flops, tr = records[0].cost.transcendentals;
      switch (e.price) {
        case Price::kFlop: EXPECT_EQ(flops, 4); EXPECT_EQ(tr, 0); break;
        case Price::kTranscendental: EXPECT_EQ(flops, 0); EXPECT_EQ(tr, 4); break;
        case Price::kErf: EXPECT_EQ(flops, 29 * 4); EXPECT_EQ(tr, 0); break;
        case Price::kErfInv: EXPECT_EQ(flops, 37 * 4); EXPECT_EQ(tr, 2 * 4); break;
        default: ADD_FAILURE() << "an elementwise price";
      }
      break;
    }
    EXPECT_TRUE(ran) << "runs on neither f32 nor i32";
    ++walked;
  }
  // Every row of the two lists (hlo/ops.h) was walked.
#define TPUMESH_HLO_ONE(k, name, price) +1
  EXPECT_EQ(walked, 0 TPUMESH_HLO_UNARY_OPS(TPUMESH_HLO_ONE) TPUMESH_HLO_BINARY_OPS(TPUMESH_HLO_ONE));
#undef TPUMESH_HLO_ONE
}

}  // namespace
}  // namespace tpumesh::hlo
