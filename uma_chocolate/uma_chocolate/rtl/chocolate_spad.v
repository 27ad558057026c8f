// Chocolate's scratchpad: on-chip SRAM of WORDS 32-bit words, one port (synchronous read, the old
// word on a read during a write; byte-enabled writes).
module chocolate_spad #(
    parameter integer WORDS = 16384,
    parameter integer AW = 14  // address bits: 2^AW >= WORDS
) (
    input  wire          clk,
    input  wire [AW-1:0] addr,   // word address
    input  wire          we,
    input  wire [3:0]    wmask,  // bytes written: bit b for wdata[8b+7:8b]
    input  wire [31:0]   wdata,
    output reg  [31:0]   rdata
);
  reg [31:0] mem[0:WORDS-1];
  always @(posedge clk) begin
    if (we) begin
      if (wmask[0]) mem[addr][7:0] <= wdata[7:0];
      if (wmask[1]) mem[addr][15:8] <= wdata[15:8];
      if (wmask[2]) mem[addr][23:16] <= wdata[23:16];
      if (wmask[3]) mem[addr][31:24] <= wdata[31:24];
    end
    rdata <= mem[addr];
  end
endmodule
