// Test helper for the pipeline tests: a model file of the built-in `tiny`
// architecture (`tpumesh init`'s seed-0 random weights, the tiny-sd-a
// reference configs), made once per test process. The embedded default
// model is another, trained one (pipeline/default_model.h); tests that
// compare a run with `simulate --arch tiny` use this file.
#ifndef TPUMESH_TESTS_TESTING_TINY_MODEL_H_
#define TPUMESH_TESTS_TESTING_TINY_MODEL_H_

#include <string>

#include "gtest/gtest.h"
#include "pipeline/init_model.h"
#include "tests/testing/temp_dir.h"

namespace tpumesh::testing {

inline std::string TinyArchModel() {
  static const std::string path = [] {
    pipeline::InitOptions init;
    init.output = ProcessTempDir() + "/tiny-arch.h5";
    const auto st = pipeline::InitModel(init);
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    return init.output;
  }();
  return path;
}

}  // namespace tpumesh::testing

#endif  // TPUMESH_TESTS_TESTING_TINY_MODEL_H_
