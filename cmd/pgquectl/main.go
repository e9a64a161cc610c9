// Command pgquectl turns a PostgreSQL database into a message queue.
package main

import "os"

func main() {
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}
