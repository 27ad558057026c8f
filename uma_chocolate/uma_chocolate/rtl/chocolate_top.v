// Chocolate as the driver sees it: the core (chocolate_core.v) and its scratchpad (chocolate_spad.v),
// whose one port is the host's (the DMA's word reads and writes) while the core is idle.
module chocolate_top #(
    parameter integer TILE_M = 8,
    parameter integer TILE_N = 8,
    parameter integer TILE_K = 8,
    parameter integer SPAD_BYTES = 65536  // a multiple of 4
) (
    input  wire                       clk,
    input  wire                       rst,
    // the host's port to the scratchpad (word address; the read answers the next cycle)
    input  wire [31:0]                host_addr,
    input  wire                       host_we,
    input  wire [3:0]                 host_wmask,
    input  wire [31:0]                host_wdata,
    output wire [31:0]                host_rdata,
    // the core's command interface (chocolate_core.v)
    input  wire                       start,
    input  wire [1:0]                 op,
    input  wire [31:0]                a_addr,
    input  wire [31:0]                b_addr,
    input  wire [31:0]                acc_addr,
    input  wire [32*TILE_N-1:0]       bias,
    input  wire [32*TILE_N-1:0]       multiplier,
    input  wire [32*TILE_N-1:0]       shift,
    input  wire [7:0]                 output_zp,
    input  wire [7:0]                 act_min,
    input  wire [7:0]                 act_max,
    output wire                       busy,
    output wire [8*TILE_M*TILE_N-1:0] out_tile
);
  localparam integer WORDS = SPAD_BYTES / 4;
  localparam integer AW = WORDS > 1 ? $clog2(WORDS) : 1;

  wire [AW-1:0] core_addr;
  wire core_we;
  wire [3:0] core_wmask;
  wire [31:0] core_wdata, rdata;

  chocolate_core #(.TILE_M(TILE_M), .TILE_N(TILE_N), .TILE_K(TILE_K), .AW(AW)) core (
      .clk(clk), .rst(rst), .start(start), .op(op), .a_addr(a_addr), .b_addr(b_addr), .acc_addr(acc_addr),
      .bias(bias), .multiplier(multiplier), .shift(shift), .output_zp(output_zp), .act_min(act_min),
      .act_max(act_max), .busy(busy), .out_tile(out_tile), .spad_addr(core_addr), .spad_we(core_we),
      .spad_wmask(core_wmask), .spad_wdata(core_wdata), .spad_rdata(rdata));

  /* verilator lint_off UNUSEDSIGNAL */  // host addresses beyond the scratchpad wrap (the driver checks them)
  wire [31:0] host_word = host_addr;
  /* verilator lint_on UNUSEDSIGNAL */
  chocolate_spad #(.WORDS(WORDS), .AW(AW)) spad (
      .clk(clk), .addr(busy ? core_addr : host_word[AW-1:0]), .we(busy ? core_we : host_we),
      .wmask(busy ? core_wmask : host_wmask), .wdata(busy ? core_wdata : host_wdata), .rdata(rdata));
  assign host_rdata = rdata;
endmodule
