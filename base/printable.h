// Text from outside (file names, layer names, JSON keys, command-line values)
// made safe to put in a one-line message.
//
// Contract: Printable(s) is valid UTF-8 with no control character: every
// well-formed UTF-8 sequence of s is kept as it is (so "café" and "猫" read as
// written); a byte that is not part of one, and every C0 control character
// and DEL, is written as an escape: \n, \r, \t, \\ for those four, \xNN
// (two hex digits) otherwise. Distinct inputs give distinct outputs, and
// Printable(Printable(s)) == Printable(s) for any s that needed no escape.
// Quoted(s) is Printable(s) between single quotes, the way a message names
// a value ("layer 'fc\n1'").
#ifndef TPUMESH_BASE_PRINTABLE_H_
#define TPUMESH_BASE_PRINTABLE_H_

#include <string>
#include <string_view>

namespace tpumesh {

std::string Printable(std::string_view s);
std::string Quoted(std::string_view s);

// A whole message made one line: as Printable but a backslash is kept, so
// the escapes Printable and Quoted already wrote into it are not escaped a
// second time (the CLI's last step before stderr).
std::string OneLine(std::string_view s);

// The shortest text that reads back as exactly v ("1.0000001", not "%g"'s
// "1"; "inf", "nan"): how a message shows a number the user gave.
std::string ShortestNumber(double v);

// s with every byte that is not part of a well-formed UTF-8 sequence
// replaced by U+FFFD, as nlohmann's dump does with error_handler_t::replace:
// for text written into a file that must be UTF-8 (a report's CSV).
std::string ValidUtf8(std::string_view s);

}  // namespace tpumesh

#endif  // TPUMESH_BASE_PRINTABLE_H_
