//===- JsonTest.cpp - the runner's JSON reader and writer -----------------===//

#include "Json.h"

#include <gtest/gtest.h>

using namespace fsdp::run;

namespace {

TEST(JsonTest, RoundTripKeepsKindsAndSortsKeys) {
  auto v = json::parse(R"({"b": [1, 2.5, "x\n\u00e9"], "a": null,
                           "c": {"t": true, "f": false}, "n": -7})");
  ASSERT_TRUE(v) << toString(v.takeError());
  const json::Object *o = v->getAsObject();
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->getInteger("n"), -7);
  EXPECT_TRUE(o->get("a")->getAsNull());
  EXPECT_EQ(o->getObject("c")->getBoolean("t"), true);
  const json::Array *b = o->getArray("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ((*b)[0].getAsInteger(), 1);
  EXPECT_EQ((*b)[1].getAsNumber(), 2.5);
  EXPECT_FALSE((*b)[1].getAsInteger());
  EXPECT_EQ((*b)[2].getAsString(), "x\n\xc3\xa9");
  EXPECT_EQ(json::write(*v), "{\"a\":null,\"b\":[1,2.5,\"x\\n\xc3\xa9\"],"
                             "\"c\":{\"f\":false,\"t\":true},\"n\":-7}");
}

TEST(JsonTest, PrettyPrintsOneMemberPerLine) {
  json::Object o{{"k", json::Array{1, 2}}, {"e", json::Object{}}};
  EXPECT_EQ(json::write(o, 2), "{\n  \"e\": {},\n  \"k\": [\n    1,\n    2\n"
                               "  ]\n}");
}

TEST(JsonTest, NumbersPrintWithSeventeenDigits) {
  EXPECT_EQ(json::write(json::Value(0.1)), "0.10000000000000001");
  EXPECT_EQ(json::write(json::Value(int64_t(1) << 62)), "4611686018427387904");
}

TEST(JsonTest, RejectsMalformedText) {
  for (const char *bad :
       {"", "{", "[1,]", "{\"a\" 1}", "{\"a\":1,\"a\":2}", "\"\\x\"", "01x",
        "[1] 2", "\"\xff\"", "\"\\ud800\"", "nul", "{\"a\":1}}"}) {
    auto v = json::parse(bad);
    EXPECT_FALSE(v) << "accepted: " << bad;
    if (!v)
      EXPECT_NE(toString(v.takeError()).find("[1:"), std::string::npos);
  }
}

TEST(JsonTest, LimitsNesting) {
  std::string deep(100000, '[');
  auto v = json::parse(deep);
  ASSERT_FALSE(v);
  EXPECT_NE(toString(v.takeError()).find("nesting too deep"),
            std::string::npos);
}

TEST(JsonTest, FixesInvalidUTF8) {
  EXPECT_EQ(json::fixUTF8("a\xff"
                          "b"),
            "a\xef\xbf\xbd"
            "b");
  EXPECT_EQ(json::fixUTF8("\xc3\xa9"), "\xc3\xa9");
}

} // namespace
