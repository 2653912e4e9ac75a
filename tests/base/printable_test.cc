#include "base/printable.h"

#include <string>

#include "gtest/gtest.h"

namespace tpumesh {
namespace {

TEST(PrintableTest, KeepsPlainTextAndWellFormedUtf8) {
  EXPECT_EQ(Printable("fc1 layer, 64x64"), "fc1 layer, 64x64");
  EXPECT_EQ(Printable("caf\xc3\xa9 \xe7\x8c\xab \xf0\x9f\x90\x88"), "caf\xc3\xa9 \xe7\x8c\xab \xf0\x9f\x90\x88");
  EXPECT_EQ(Printable(""), "");
}

TEST(PrintableTest, EscapesControlCharactersSoAMessageStaysOneLine) {
  EXPECT_EQ(Printable("a\nb"), "a\\nb");
  EXPECT_EQ(Printable("a\r\n\tb"), "a\\r\\n\\tb");
  EXPECT_EQ(Printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(Printable("\x1b[31mred"), "\\x1b[31mred");
  EXPECT_EQ(Printable("\x7f"), "\\x7f");
  // The escape character itself is escaped, so no two inputs read the same.
  EXPECT_EQ(Printable("a\\nb"), "a\\\\nb");
  EXPECT_NE(Printable("a\\nb"), Printable("a\nb"));
}

TEST(PrintableTest, EscapesBytesThatAreNotUtf8) {
  EXPECT_EQ(Printable("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(Printable("\xc3"), "\\xc3");                  // truncated sequence
  EXPECT_EQ(Printable("\xc3(x"), "\\xc3(x");              // bad continuation
  EXPECT_EQ(Printable("\xc0\xaf"), "\\xc0\\xaf");         // overlong '/'
  EXPECT_EQ(Printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a UTF-16 surrogate
  EXPECT_EQ(Printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  EXPECT_EQ(Printable("\xef\xbb\xbfLayer"), "\xef\xbb\xbfLayer");    // a BOM is a character
}

TEST(PrintableTest, QuotedNamesAValue) {
  EXPECT_EQ(Quoted("fc\n1"), "'fc\\n1'");
  EXPECT_EQ(Quoted("x"), "'x'");
}

// For text written into a file that must be UTF-8 (a report's CSV): every
// byte outside a well-formed sequence becomes U+FFFD, the rest is kept.
TEST(PrintableTest, ValidUtf8ReplacesWhatIsNotUtf8) {
  EXPECT_EQ(ValidUtf8("fc\xff\x01"), "fc\xef\xbf\xbd\x01");
  EXPECT_EQ(ValidUtf8("caf\xc3\xa9 \xe7\x8c\xab"), "caf\xc3\xa9 \xe7\x8c\xab");
  EXPECT_EQ(ValidUtf8("\xc3"), "\xef\xbf\xbd");                          // cut short
  EXPECT_EQ(ValidUtf8("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // a surrogate
  EXPECT_EQ(ValidUtf8(""), "");
}

// The CLI's last pass over a whole message: control characters and bytes
// that are not UTF-8 escaped, the escapes already in it left as they are.
TEST(PrintableTest, OneLineKeepsTheEscapesAMessageHolds) {
  EXPECT_EQ(OneLine("layer " + Quoted("fc\n1") + " at\nline 2"), "layer 'fc\\n1' at\\nline 2");
  EXPECT_EQ(OneLine("C:\\models \xff"), "C:\\models \\xff");
}

}  // namespace
}  // namespace tpumesh
