// Chocolate's output stage, one int8 output: clamp(output_zp + requant(acc + bias, multiplier, shift),
// act_min, act_max), exactly as the C model's chocolate_store (kit_requantize: TVM's qnn.requantize,
// acc * multiplier * 2^(shift - 31) rounded half up, saturated to int32), for every int32 argument.
// Combinational: the store feeds it one accumulator a cycle.
module chocolate_output_stage (
    input  wire [31:0] acc,         // the accumulator (int32)
    input  wire [31:0] bias,        // int32: the sum wraps, as a 32-bit adder
    input  wire [31:0] multiplier,  // int32
    input  wire [31:0] shift,       // int32, any value
    input  wire [7:0]  output_zp,   // int8
    input  wire [7:0]  act_min,     // int8, act_min <= act_max
    input  wire [7:0]  act_max,     // int8
    output wire [7:0]  out          // int8
);
  wire signed [31:0] v = $signed(acc + bias);
  wire signed [63:0] x = $signed({{32{v[31]}}, v}) * $signed({{32{multiplier[31]}}, multiplier});  // |x| <= 2^62
  wire signed [32:0] right = 33'sd31 - $signed({shift[31], shift});  // the product's right shift
  wire signed [95:0] wide = {{32{x[63]}}, x};

  // right >= 96: |x| < 2^63 <= 2^(right - 1), so (x + 2^(right - 1)) / 2^right rounds to 0;
  // 1 <= right <= 95: floor((x + 2^(right - 1)) / 2^right); right <= 0: x * 2^-right, exact, saturated
  // beyond 2^33 (x is 0 or at least 1 in magnitude, int32 holds less than 2^31).
  wire [6:0] down = right[6:0];
  wire [6:0] up = 7'd0 - right[6:0];
  wire signed [95:0] half = 96'sd1 <<< (down - 7'd1);
  reg signed [95:0] q;
  always @* begin
    if (right >= 33'sd96) q = 96'sd0;
    else if (right >= 33'sd1) q = (wide + half) >>> down;
    else if (right <= -33'sd33) q = x == 64'sd0 ? 96'sd0 : x[63] ? -(96'sd1 <<< 94) : (96'sd1 <<< 94);
    else q = wide <<< up;
  end
  // saturated to int32, then the zero point and the clamp (all within int8's range after the clamp)
  wire signed [95:0] int32_max = 96'sd2147483647, int32_min = -96'sd2147483648;
  wire signed [31:0] r = q > int32_max ? 32'sh7fffffff : q < int32_min ? 32'sh80000000 : q[31:0];
  wire signed [32:0] z = $signed({r[31], r}) + $signed({{25{output_zp[7]}}, output_zp});
  wire signed [32:0] lo = $signed({{25{act_min[7]}}, act_min}), hi = $signed({{25{act_max[7]}}, act_max});
  /* verilator lint_off UNUSEDSIGNAL */  // within [act_min, act_max]: the bits above 7 repeat bit 7
  wire signed [32:0] clamped = z < lo ? lo : z > hi ? hi : z;
  /* verilator lint_on UNUSEDSIGNAL */
  assign out = clamped[7:0];
endmodule
