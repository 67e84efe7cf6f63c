module {
  func.func @main(%arg0: !torch.vtensor<[?,?,16],f32>) -> !torch.vtensor<[?,?,32],f32> {
    %0 = torch.symbolic_int "s0" {min_val = 1, max_val = 64} : !torch.int
    %1 = torch.symbolic_int "s1" {min_val = 2, max_val = 4096} : !torch.int
    torch.bind_symbolic_shape %arg0, [%0, %1], affine_map<()[s0, s1] -> (s0, s1, 16)> : !torch.vtensor<[?,?,16],f32>
    %w = torch.vtensor.literal(dense_resource<w> : tensor<32x16xf32>) : !torch.vtensor<[32,16],f32>
    %b = torch.vtensor.literal(dense<0.0> : tensor<32xf32>) : !torch.vtensor<[32],f32>
    %2 = torch.aten.linear %arg0, %w, %b : !torch.vtensor<[?,?,16],f32>, !torch.vtensor<[32,16],f32>, !torch.vtensor<[32],f32> -> !torch.vtensor<[?,?,32],f32>
    torch.bind_symbolic_shape %2, [%0, %1], affine_map<()[s0, s1] -> (s0, s1, 32)> : !torch.vtensor<[?,?,32],f32>
    %half = torch.constant.float 5.000000e-01
    %3 = torch.aten.mul.Scalar %2, %half : !torch.vtensor<[?,?,32],f32>, !torch.float -> !torch.vtensor<[?,?,32],f32>
    torch.bind_symbolic_shape %3, [%0, %1], affine_map<()[s0, s1] -> (s0, s1, 32)> : !torch.vtensor<[?,?,32],f32>
    %int0 = torch.constant.int 0
    %int1 = torch.constant.int 1
    %4 = torch.aten.size.int %3, %int0 : !torch.vtensor<[?,?,32],f32>, !torch.int -> !torch.int
    %5 = torch.aten.size.int %3, %int1 : !torch.vtensor<[?,?,32],f32>, !torch.int -> !torch.int
    %6 = torch.aten.mul.int %4, %5 : !torch.int, !torch.int -> !torch.int
    %int32 = torch.constant.int 32
    %7 = torch.prim.ListConstruct %6, %int32 : (!torch.int, !torch.int) -> !torch.list<int>
    %8 = torch.aten.view %3, %7 : !torch.vtensor<[?,?,32],f32>, !torch.list<int> -> !torch.vtensor<[?,32],f32>
    torch.bind_symbolic_shape %8, [%0, %1], affine_map<()[s0, s1] -> (s0 * s1, 32)> : !torch.vtensor<[?,32],f32>
    %9 = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
    %10 = torch.aten.flip %8, %9 : !torch.vtensor<[?,32],f32>, !torch.list<int> -> !torch.vtensor<[?,32],f32>
    torch.bind_symbolic_shape %10, [%0, %1], affine_map<()[s0, s1] -> (s0 * s1, 32)> : !torch.vtensor<[?,32],f32>
    %11 = torch.prim.ListConstruct %4, %5, %int32 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
    %12 = torch.aten.view %10, %11 : !torch.vtensor<[?,32],f32>, !torch.list<int> -> !torch.vtensor<[?,?,32],f32>
    torch.bind_symbolic_shape %12, [%0, %1], affine_map<()[s0, s1] -> (s0, s1 floordiv 2 + s1 ceildiv 2, 32)> : !torch.vtensor<[?,?,32],f32>
    return %12 : !torch.vtensor<[?,?,32],f32>
  }
}
