package grpcreflect

import (
	"flag"
	"io"
	"testing"
)

func TestMode_ForLoopbackOnlyByDefault(t *testing.T) {
	cases := []struct {
		name string
		mode Mode
		addr string
		want bool
	}{
		{"auto ipv4 loopback", Auto, "127.0.0.1:7070", true},
		{"auto other loopback", Auto, "127.0.0.2:7070", true},
		{"auto ipv6 loopback", Auto, "[::1]:7070", true},
		{"auto localhost", Auto, "localhost:7070", true},
		{"auto every interface", Auto, ":7070", false},
		{"auto wildcard", Auto, "0.0.0.0:7070", false},
		{"auto lan", Auto, "192.168.1.5:7070", false},
		{"on lan", On, "0.0.0.0:7070", true},
		{"off loopback", Off, "127.0.0.1:7070", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.mode.For(c.addr); got != c.want {
				t.Fatalf("%v.For(%q) = %v, want %v", c.mode, c.addr, got, c.want)
			}
		})
	}
}

func TestMode_FlagForms(t *testing.T) {
	cases := []struct {
		args []string
		want Mode
		err  bool
	}{
		{nil, Auto, false},
		{[]string{"--grpc-reflection"}, On, false},
		{[]string{"--grpc-reflection=false"}, Off, false},
		{[]string{"--grpc-reflection=auto"}, Auto, false},
		{[]string{"--grpc-reflection=maybe"}, Auto, true},
	}
	for _, c := range cases {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var m Mode
		fs.Var(&m, "grpc-reflection", "")
		err := fs.Parse(c.args)
		if (err != nil) != c.err || (!c.err && m != c.want) {
			t.Fatalf("%v: mode %v err %v, want %v err %v", c.args, m, err, c.want, c.err)
		}
	}
}
