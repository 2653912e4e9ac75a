func.func @main(%x: tensor<1x4x4x1xf32>, %s: tensor<1x2x2x1xf32>) -> tensor<1x4x4x1xf32> {
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = "stablehlo.select_and_scatter"(%x, %s, %c) <{padding = dense<0> : tensor<4x2xi64>, window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 1>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  }, {
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) : (tensor<1x4x4x1xf32>, tensor<1x2x2x1xf32>, tensor<f32>) -> tensor<1x4x4x1xf32>
  %2 = chlo.lgamma %0 : tensor<1x4x4x1xf32> -> tensor<1x4x4x1xf32>
  %3 = chlo.zeta %2, %0 : tensor<1x4x4x1xf32>, tensor<1x4x4x1xf32> -> tensor<1x4x4x1xf32>
  return %3 : tensor<1x4x4x1xf32>
}
