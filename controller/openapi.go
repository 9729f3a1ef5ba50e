package controller

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill/seckill/docs"
)

// openapiJSON is the API's document in JSON (docs.OpenAPIJSON). The
// document is embedded and its tests convert it: a failure is a bug.
func openapiJSON() []byte {
	b, err := docs.OpenAPIJSON()
	if err != nil {
		panic(fmt.Sprintf("controller: the OpenAPI document: %v", err))
	}
	return b
}

// handleDocument serves a document embedded in the program, of the
// content type given: the API's description (docs/openapi.yaml).
func handleDocument(contentType string, body []byte) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Data(http.StatusOK, contentType, body)
	}
}
