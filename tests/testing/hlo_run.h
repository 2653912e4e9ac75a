// A small StableHLO module run in a test: @main of `text` (read as t.mlir,
// verified) on arguments given as their elements' values, result 0's
// elements returned (a complex element as two values). A failure to read,
// verify or run is a test failure and returns {}.
#ifndef TPUMESH_TESTS_TESTING_HLO_RUN_H_
#define TPUMESH_TESTS_TESTING_HLO_RUN_H_

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "hlo/interpreter.h"

namespace tpumesh::testing {

template <typename T>
std::vector<T> RunMain(const std::string& text, const std::vector<std::vector<T>>& args) {
  auto m = hlo::ParseModule(text, "t.mlir");
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return {};
  const Status verified = hlo::Verify(*m);
  EXPECT_TRUE(verified.ok()) << verified.message();
  if (!verified.ok()) return {};
  std::vector<hlo::Tensor> in;
  for (size_t i = 0; i < args.size(); ++i) {
    hlo::Tensor t = hlo::NewTensor(m->funcs[0].arg_types[i], nullptr).value();
    EXPECT_EQ(static_cast<size_t>(t.type.size_bytes()), args[i].size() * sizeof(T));
    std::memcpy(t.data.mutable_raw(), args[i].data(), static_cast<size_t>(t.type.size_bytes()));
    in.push_back(std::move(t));
  }
  auto r = hlo::RunFunction(*m, "main", std::move(in), hlo::DeviceSite{}, hlo::Options{});
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return {};
  const hlo::Tensor& out = (*r)[0];
  const T* p = out.as<T>();
  return std::vector<T>(p, p + out.type.size_bytes() / static_cast<int64_t>(sizeof(T)));
}

}  // namespace tpumesh::testing

#endif  // TPUMESH_TESTS_TESTING_HLO_RUN_H_
