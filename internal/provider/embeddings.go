package provider

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Bounds of an embeddings reply.
const (
	embeddingsMaxReply = 64 << 20
	// DefaultEmbeddingsTimeout bounds one Embed call.
	DefaultEmbeddingsTimeout = 30 * time.Second
)

// Embeddings is a client of the OpenAI embeddings API (POST
// {BaseURL}/embeddings) and the servers that copy it (Ollama, vLLM,
// llama.cpp). It is safe for concurrent use.
type Embeddings struct {
	url     string
	model   string
	apiKey  string
	client  *http.Client
	timeout time.Duration
}

// NewEmbeddings returns an embeddings client for model; BaseURL, APIKey,
// HTTPClient and Timeout are read as OpenAIConfig's (Timeout default
// DefaultEmbeddingsTimeout). It does no I/O.
func NewEmbeddings(model string, cfg OpenAIConfig) *Embeddings {
	client := cfg.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	return &Embeddings{
		url:   strings.TrimRight(cmp.Or(cfg.BaseURL, DefaultOpenAIBaseURL), "/") + "/embeddings",
		model: model, apiKey: cfg.APIKey, client: client, timeout: cmp.Or(cfg.Timeout, DefaultEmbeddingsTimeout),
	}
}

// Embed returns one vector per text, in the order given. A non-2xx reply
// is an *Error with the server's message; a reply with another number of
// vectors, or vectors of different lengths, is an error too.
func (e *Embeddings) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	body, err := json.Marshal(map[string]any{"model": e.model, "input": texts})
	if err != nil {
		return nil, err
	}
	callCtx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	header := http.Header{}
	if e.apiKey != "" {
		header.Set("Authorization", "Bearer "+e.apiKey)
	}
	req, err := newJSONRequest(callCtx, e.url, body, header, false)
	if err != nil {
		return nil, &Error{Provider: openAIName, Message: fmt.Sprintf("build embeddings request: %v", err), Err: err}
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, &Error{Provider: openAIName, Message: fmt.Sprintf("embeddings: %v", err), Retryable: true, Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, embeddingsMaxReply))
	if err != nil {
		return nil, &Error{Provider: openAIName, Message: fmt.Sprintf("embeddings: read reply: %v", err), Retryable: true, Err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := cmp.Or(serverErrorMessage(raw), truncate(strings.TrimSpace(string(raw)), maxErrorMessage), http.StatusText(resp.StatusCode))
		return nil, &Error{Provider: openAIName, StatusCode: resp.StatusCode, Message: "embeddings: " + msg, Retryable: RetryableStatus(resp.StatusCode)}
	}
	var reply struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &reply); err != nil {
		return nil, &Error{Provider: openAIName, Message: fmt.Sprintf("embeddings: decode reply: %v", err), Err: err}
	}
	if len(reply.Data) != len(texts) {
		return nil, &Error{Provider: openAIName, Message: fmt.Sprintf("embeddings: %d vectors for %d texts", len(reply.Data), len(texts))}
	}
	// The indexes order the vectors when they are a permutation; servers
	// that leave them out list the vectors in order.
	seen := make([]bool, len(texts))
	permuted := true
	for _, d := range reply.Data {
		if d.Index < 0 || d.Index >= len(seen) || seen[d.Index] {
			permuted = false
			break
		}
		seen[d.Index] = true
	}
	out := make([][]float32, len(texts))
	for i, d := range reply.Data {
		if len(d.Embedding) == 0 || len(d.Embedding) != len(reply.Data[0].Embedding) {
			return nil, &Error{Provider: openAIName, Message: "embeddings: vectors of different lengths"}
		}
		at := i
		if permuted {
			at = d.Index
		}
		out[at] = d.Embedding
	}
	return out, nil
}
