// Command fakes runs the fake Telegram Bot API and the fake Anthropic API on
// loopback, for trying clawpen (or the host container) without either service.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/clawpen/clawpen/internal/fakellm"
	"github.com/clawpen/clawpen/internal/faketg"
)

func main() {
	tgAddr := flag.String("telegram", "127.0.0.1:8081", "listen address of the fake Telegram Bot API")
	llmAddr := flag.String("model", "127.0.0.1:8082", "listen address of the fake Anthropic API")
	key := flag.String("key", "sk-fake", "the only API key the fake model accepts")
	flag.Parse()

	tg, err := faketg.Start(*tgAddr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake telegram:", err)
		os.Exit(1)
	}
	defer tg.Close()
	llm, err := fakellm.Start(*llmAddr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake model:", err)
		os.Exit(1)
	}
	defer llm.Close()
	llm.SetRequiredKey(*key)

	fmt.Printf(`fakes running. Put these in .env:

TELEGRAM_API_URL=%s
TELEGRAM_BOT_TOKEN=123456:fake-token
ANTHROPIC_BASE_URL=%s
ANTHROPIC_API_KEY=%s
CLAWPEN_OWNER_ID=42

Say something as the owner:
  curl -d '{"chat_id":42,"chat_type":"private","from":{"id":42,"first_name":"Owner"},"text":"hello"}' %s/control/message
See what the bot sent:
  curl '%s/control/sent?chat_id=42'
`, tg.URL(), llm.URL(), *key, tg.URL(), tg.URL())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
}
