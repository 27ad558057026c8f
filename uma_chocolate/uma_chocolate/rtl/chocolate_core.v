// Chocolate's matrix core: the command interface the C driver writes, a TILE_M x TILE_N array of int8
// multiply-accumulators fed TILE_K deep, and the output stage; its operands and accumulators in the
// scratchpad (chocolate_spad.v) behind one 32-bit port, which it drives while busy.
//
// Commands (start with op, taken when idle), scratchpad byte addresses as the C API's:
//   ZERO    accumulator tile at acc_addr (TILE_M x TILE_N int32) set to 0       TILE_M*TILE_N cycles
//   MATMUL  acc += a . b: A tile [TILE_M][TILE_K] int8 at a_addr, B [TILE_K][TILE_N] at b_addr, loaded
//           a byte a cycle into the array's registers (any alignment), TILE_K cycles of multiply-adds
//           (a row of the array's MACs a cycle each), then each accumulator read, added to and
//           written back (32-bit sums wrapping, as the C model's)   TILE_M*TILE_K + TILE_K*TILE_N + 2
//                                                                    + TILE_K + 2*TILE_M*TILE_N cycles
//   STORE   the accumulator tile through the output stage (chocolate_output_stage.v) of the tile's
//           channels (bias, multiplier, shift: TILE_N of each, the configuration registers) into
//           out_tile, which the driver copies to the host                  TILE_M*TILE_N + 1 cycles
module chocolate_core #(
    parameter integer TILE_M = 8,
    parameter integer TILE_N = 8,
    parameter integer TILE_K = 8,
    parameter integer AW = 14  // scratchpad word address bits
) (
    input  wire                       clk,
    input  wire                       rst,
    input  wire                       start,
    input  wire [1:0]                 op,          // 0 ZERO, 1 MATMUL, 2 STORE
    input  wire [31:0]                a_addr,
    input  wire [31:0]                b_addr,
    input  wire [31:0]                acc_addr,    // a multiple of 4
    input  wire [32*TILE_N-1:0]       bias,        // the tile's channels, channel j at [32j +: 32]
    input  wire [32*TILE_N-1:0]       multiplier,
    input  wire [32*TILE_N-1:0]       shift,
    input  wire [7:0]                 output_zp,
    input  wire [7:0]                 act_min,
    input  wire [7:0]                 act_max,
    output wire                       busy,
    output wire [8*TILE_M*TILE_N-1:0] out_tile,    // STORE's outputs, [TILE_M][TILE_N] int8
    output reg  [AW-1:0]              spad_addr,
    output reg                        spad_we,
    output reg  [3:0]                 spad_wmask,
    output reg  [31:0]                spad_wdata,
    input  wire [31:0]                spad_rdata
);
  localparam integer NA = TILE_M * TILE_K, NB = TILE_K * TILE_N, NC = TILE_M * TILE_N;
  localparam [2:0] IDLE = 3'd0, ZERO = 3'd1, LOAD_A = 3'd2, LOAD_B = 3'd3, MAC = 3'd4, WB_READ = 3'd5,
                   WB_WRITE = 3'd6, STORE = 3'd7;

  reg [2:0] state;
  reg [31:0] a0, b0, c0;        // the command's addresses
  reg [31:0] idx;               // the phase's element (MAC: the depth k)
  reg [31:0] col;               // STORE: idx's channel in the tile
  reg pending;                  // a read was issued last cycle, for element got
  /* verilator lint_off UNUSEDSIGNAL */  // an element index's high bits (always below NA, NB, NC)
  reg [31:0] got, got_col;
  /* verilator lint_on UNUSEDSIGNAL */
  reg [1:0] lane;               // its byte in the word read
  reg signed [7:0] a_tile[0:NA-1];
  reg signed [7:0] b_tile[0:NB-1];
  reg [31:0] sums[0:NC-1];      // this call's dot products, [TILE_M][TILE_N]
  reg [7:0] outs[0:NC-1];

  assign busy = state != IDLE;

  /* verilator lint_off UNUSEDSIGNAL */  // byte addresses beyond the scratchpad wrap (the driver checks them)
  wire [31:0] a_at = a0 + idx, b_at = b0 + idx, c_at = c0 + (idx << 2);
  /* verilator lint_on UNUSEDSIGNAL */
  wire [7:0] read_byte = spad_rdata[{lane, 3'b000} +: 8];

  // this cycle's scratchpad request (the spad answers a read the next cycle)
  always @* begin
    spad_addr = c_at[AW+1:2];
    spad_we = 1'b0;
    spad_wmask = 4'h0;
    spad_wdata = 32'd0;
    case (state)
      LOAD_A: spad_addr = a_at[AW+1:2];
      LOAD_B: spad_addr = b_at[AW+1:2];
      ZERO: begin
        spad_we = 1'b1;
        spad_wmask = 4'hf;
      end
      WB_WRITE: begin
        spad_we = 1'b1;
        spad_wmask = 4'hf;
        spad_wdata = spad_rdata + sums[idx];
      end
      default: ;
    endcase
  end

  wire [7:0] stage_out;
  chocolate_output_stage stage (
      .acc(spad_rdata), .bias(bias[32*got_col +: 32]), .multiplier(multiplier[32*got_col +: 32]),
      .shift(shift[32*got_col +: 32]), .output_zp(output_zp), .act_min(act_min), .act_max(act_max),
      .out(stage_out));

  // an int8 x int8 product, sign-extended to the 32-bit sums (which wrap, as a 32-bit adder)
  function automatic [31:0] product(input signed [7:0] x, input signed [7:0] y);
    reg signed [15:0] p;
    begin
      p = x * y;
      product = {{16{p[15]}}, p};
    end
  endfunction

  integer i, n;
  always @(posedge clk) begin
    if (rst) begin
      state <= IDLE;
      pending <= 1'b0;
    end else begin
      case (state)
        IDLE:
        if (start) begin
          a0 <= a_addr;
          b0 <= b_addr;
          c0 <= acc_addr;
          idx <= 32'd0;
          col <= 32'd0;
          pending <= 1'b0;
          state <= op == 2'd0 ? ZERO : op == 2'd1 ? LOAD_A : STORE;
        end
        ZERO: begin
          idx <= idx + 32'd1;
          if (idx == NC - 1) state <= IDLE;
        end
        LOAD_A, LOAD_B: begin  // a byte a cycle: issue element idx, keep the one read last cycle
          if (pending && state == LOAD_A) a_tile[got] <= read_byte;
          if (pending && state == LOAD_B) b_tile[got] <= read_byte;
          if (idx < (state == LOAD_A ? NA : NB)) begin
            got <= idx;
            lane <= state == LOAD_A ? a_at[1:0] : b_at[1:0];
            pending <= 1'b1;
            idx <= idx + 32'd1;
          end else begin
            pending <= 1'b0;
            idx <= 32'd0;
            state <= state == LOAD_A ? LOAD_B : MAC;
          end
        end
        MAC: begin  // depth idx: every MAC of the array at once
          for (i = 0; i < TILE_M; i = i + 1) begin
            for (n = 0; n < TILE_N; n = n + 1) begin
              sums[i*TILE_N+n] <= (idx == 32'd0 ? 32'd0 : sums[i*TILE_N+n]) +
                                  product(a_tile[i*TILE_K+idx], b_tile[idx*TILE_N+n]);
            end
          end
          if (idx == TILE_K - 1) begin
            idx <= 32'd0;
            state <= WB_READ;
          end else idx <= idx + 32'd1;
        end
        WB_READ: state <= WB_WRITE;
        WB_WRITE: begin
          if (idx == NC - 1) state <= IDLE;
          else begin
            idx <= idx + 32'd1;
            state <= WB_READ;
          end
        end
        STORE: begin
          if (pending) outs[got] <= stage_out;
          if (idx < NC) begin
            got <= idx;
            got_col <= col;
            col <= col == TILE_N - 1 ? 32'd0 : col + 32'd1;
            pending <= 1'b1;
            idx <= idx + 32'd1;
          end else begin
            pending <= 1'b0;
            state <= IDLE;
          end
        end
      endcase
    end
  end

  genvar e;
  generate
    for (e = 0; e < NC; e = e + 1) begin : tile_out
      assign out_tile[8*e +: 8] = outs[e];
    end
  endgenerate
endmodule
