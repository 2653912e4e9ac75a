#loc1 = loc("x")
"builtin.module"() <{sym_name = "jit_f"}> ({
  "func.func"() <{function_type = (tensor<4x8xf32>) -> tensor<4xf32>, sym_name = "main"}> ({
  ^bb0(%arg0: tensor<4x8xf32> loc("x")):
    %c = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32> loc(#loc2)
    %cst = "stablehlo.constant"() <{value = dense<"0x0000C07F"> : tensor<f32>}> : () -> tensor<f32> loc(#loc2)
    %0:2 = "stablehlo.while"(%c, %arg0) ({
    ^bb0(%a0: tensor<i32>, %a1: tensor<4x8xf32>):
      %k = "stablehlo.constant"() <{value = dense<3> : tensor<i32>}> : () -> tensor<i32> loc(#loc2)
      %1 = "stablehlo.compare"(%a0, %k) <{comPare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<i32>, tensor<i32>) -> tensor<i1> loc(#loc3)   
   "stablehlo.return"(%1) : (tensor<i1>) -> () loc(#loc3)
    }, {
    ^bb0(%a0: tensor<i32>, %a1: tensor<4x8xf32>):
      %k = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32> loc(#loc2)
      %1 = "stablehlo.add"(%a0, %k) : (tensor<i32>, tensor<i32>) -> tensor<i32> loc(#loc4)
      %2 = "stablehlo.add"(%a1, %a1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc(#loc4)
      "stablehlo.return"(%1, %2) : (tensor<i32>, tensor<4x8xf32>) -> () loc(#loc4)
    }) : (tensor<i32>, tensor<4x8xf32>) -> (tensor<i32>, tensor<4x8xf32>) loc(#loc5)
    %3 = "stablehlo.reduce"(%0#1, %cst) <{dimensions = array<i64: 1>}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %4 = "stablehlo.maximum"(%l, %r) : (tensor<f32>, tensor<f32>) -> tensor<f32> loc(#loc6)
      "stablehlo.return"(%4) : (tensor<f32>) -> () loc(#loc6)
    }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32> loc(#loc6)
    "func.return"(%3) : (tensor<4xf32>) -> () loc(#loc)
  }) : () -> () loc(#loc)
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> () loc(#loc)
#loc = loc(unknown)
#loc2 = loc("f.py":3:7 to :20)
#loc3 = loc("jit(f)/while/cond/lt"(#loc2))
#loc4 = loc("jit(f)/while/body/add"(#loc2))
#loc5 = loc("jit(f)/while"(#loc2))
#loc6 = loc(callsite(#loc3 at fused[#loc1, #loc2]))
