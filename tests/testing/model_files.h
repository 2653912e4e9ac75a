// Test helpers for the model tests: a file's bytes, and a component's
// parameters straight from a diffusers safetensors file (f32).
#ifndef TPUMESH_TESTS_TESTING_MODEL_FILES_H_
#define TPUMESH_TESTS_TESTING_MODEL_FILES_H_

#include <cstdio>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "io/safetensors.h"
#include "models/params.h"

namespace tpumesh::testing {

inline std::string Slurp(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  std::string s;
  if (!f) return s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  std::fclose(f);
  return s;
}

// Every tensor of the file as f32; a failure to open is a test failure and
// an empty map.
inline models::ParamMap LoadParams(const std::string& safetensors) {
  auto f = pipeline::SafetensorsFile::Open(safetensors);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  std::map<std::string, mesh::Array> m;
  if (!f.ok()) return models::ParamMap();
  for (const auto& e : f->entries()) {
    auto a = f->Read(e.name, mesh::DType::kF32);
    if (a.ok()) m[e.name] = *a;
  }
  return models::ParamMap(std::move(m));
}

}  // namespace tpumesh::testing

#endif  // TPUMESH_TESTS_TESTING_MODEL_FILES_H_
