#pragma once
// Recompile report: turns a host log with per-iteration markers and `To compile op: <kernel>`
// lines into the per-iteration op list of the reference script recompiled_op.py (kept verbatim
// in tests/golden/recompile/recompiled_op.py), and summarizes which kernels look like
// dynamic-shape recompiles. See docs/recompile-report.md for the workflow.
//
// The list format is the script's, byte for byte, so existing tooling that reads
// recompile_op_list.txt keeps working whichever of the two produced it.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/kernel_name.h"  // parseKernelName, used by summarize

namespace gearbox {

// The script's defaults: a line containing kDefaultSplitFlag opens a new section; a line
// containing kRecompileFlag names one compiled kernel.
inline constexpr std::string_view kDefaultSplitFlag = "=====iter";
inline constexpr std::string_view kRecompileFlag = "To compile op: ";

// Kernels compiled per section of the log. Section 0 holds what precedes the first marker;
// section k >= 1 holds what follows the k-th marker. With the markers printed at the top of
// each training step (`print('To compile op|=====iter%d' % idx)`), section k is step idx k-1.
struct RecompileReport {
  // sections[k]: distinct kernel names of section k, in order of first appearance.
  std::vector<std::vector<std::string>> sections;
};

// Parses a log exactly like recompiled_op.py's func(): line breaks are "\n", "\r\n" or a lone
// "\r" (Python's universal newlines), each line is stripped of Python whitespace (ASCII and
// Unicode, text taken as UTF-8), a line containing `splitFlag` opens a new section (checked
// first, so a marker line never contributes a kernel), and any other line containing
// kRecompileFlag contributes the text between its first and second occurrence of the flag
// (Python's `line.split(flag)[1]`). Never throws; any text parses.
RecompileReport parseCompileLog(std::string_view text,
                                std::string_view splitFlag = kDefaultSplitFlag);

// Writes recompile_op_list.txt: per section "iter: <k>\n" then the names joined by "," and
// "\n" (an empty line for a section without compiles).
std::string formatRecompileOpList(const RecompileReport& report);

// Human-readable analysis of a report, for stdout:
//  - a totals line (sections, distinct kernels, entries) and the entries per section;
//  - the dynamic-shape suspects: kernels listed in a section with index > stableSteps. With
//    the default 3 that is section 4 on, i.e. everything compiled after the third step, as the
//    script's documentation advises (steps 1-3 are sections 1-3, warm-up is section 0);
//  - per op type of the suspects (the name up to its first '_'), in alphabetical order: the
//    suspect kernels with the sections that compiled them, and -- for names in gearbox's
//    format -- each (input, dim) position whose value differs across all kernels of that op
//    type with the same input ranks in the whole log, with the distinct values in ascending
//    order. Names that do not parse are listed without dim analysis.
// Throws Error(kConfig) if stableSteps is negative.
std::string summarize(const RecompileReport& report, int stableSteps = 3);

}  // namespace gearbox
