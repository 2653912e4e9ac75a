#include "base/status.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace tpumesh {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgumentError("odd: " + std::to_string(x));
  return x / 2;
}

Status Quarter(int x, int* out) {
  TPUMESH_ASSIGN_OR_RETURN(int h, Half(x));
  TPUMESH_ASSIGN_OR_RETURN(*out, Half(h));
  return OkStatus();
}

TEST(StatusTest, OkAndError) {
  EXPECT_TRUE(OkStatus().ok());
  EXPECT_EQ(OkStatus().ToString(), "OK");
  Status s = ResourceExhaustedError("device 3 out of HBM");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.ToString(), "RESOURCE_EXHAUSTED: device 3 out of HBM");
  EXPECT_EQ(s.WithContext("pmap").message(), "pmap: device 3 out of HBM");
}

TEST(StatusTest, MacrosPropagate) {
  int q = 0;
  EXPECT_TRUE(Quarter(12, &q).ok());
  EXPECT_EQ(q, 3);
  Status s = Quarter(6, &q);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd: 3");
}

TEST(StatusTest, StatusOrHoldsMoveOnly) {
  StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(7);
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> v = std::move(p).value();
  EXPECT_EQ(*v, 7);
  StatusOr<std::unique_ptr<int>> e = NotFoundError("x");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tpumesh
